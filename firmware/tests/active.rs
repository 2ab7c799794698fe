//! Active opens, per state: SYN_SENT, AWAIT_REPLY, AWAIT_RTR_ACK.

mod common;

use common::*;
use iwnic_firmware::{Config, Counters, State};
use iwnic_proto::ddp::{MessageRepr, Opcode};
use iwnic_proto::errno::{ECONNREFUSED, ECONNRESET, EINVAL, ETIMEDOUT};
use iwnic_proto::fpdu::FpduRepr;
use iwnic_proto::host::{Command, EventKind};
use iwnic_proto::mpa::{FrameKind, RtrTypes, V2Block, REPLY_KEY};
use iwnic_proto::smoltcp_wire::TcpControl;
use smoltcp::time::Duration;

fn block(rtr: RtrTypes, ird: u16, ord: u16) -> Option<V2Block> {
    Some(V2Block {
        peer_to_peer: rtr.count() > 0,
        rtr,
        ird,
        ord,
    })
}

mod syn_sent {
    use super::*;

    #[test]
    fn the_read_rtr_offered_raises_an_ord_of_0_to_1() {
        // A zero-length Read is an RDMA Read Request: the request offers it with ORD 1.
        let mut bench = Bench::default();
        let (_, _, request) =
            active_until_request_with(&mut bench, connect_to_peer(4, 0, false, b""));
        let block = parse_mpa(&request).v2.unwrap();
        assert!(block.rtr.read);
        assert_eq!((block.ird, block.ord), (4, 1));
    }

    /// A device that issues no Reads (`max_ord` 0) offers the Write RTR alone and keeps
    /// ORD 0: the Read RTR would need an ORD of 1, beyond its limit.
    #[test]
    fn a_device_without_reads_offers_the_write_rtr_alone() {
        let mut bench = Bench::with(Config {
            max_ord: 0,
            ..config()
        });
        let (mut peer, _, request) =
            active_until_request_with(&mut bench, connect_to_peer(4, 0, false, b""));
        let offered = parse_mpa(&request).v2.unwrap();
        assert_eq!((offered.rtr, offered.ord), (RtrTypes::WRITE, 0));
        bench.deliver(peer.data(&reply(
            FrameKind::Accept,
            block(RtrTypes::WRITE, 16, 4),
            b"",
        )));
        peer.saw_all(&bench.sent());
        bench.deliver(peer.ack());
        let out = bench.out();
        assert_eq!(briefs(&out), ["ConnectReply(0)"]);
        assert_eq!(event(&out[0]).ord, 0);
    }

    /// Port 0 is no port: an ephemeral range from 0 skips it.
    #[test]
    fn an_ephemeral_port_base_of_0_never_gives_port_0() {
        let mut bench = Bench::with(Config {
            ephemeral_port_base: 0,
            ..config()
        });
        bench.command(connect_to_peer(4, 4, false, b""));
        assert_eq!(briefs(&bench.out()), ["DONE(0)"]);
        let syn = bench.sent();
        assert_eq!(kinds(&syn), ["SYN"]);
        assert_eq!(syn[0].src_port, 1);
    }

    #[test]
    fn rst_to_our_syn_is_connection_refused() {
        let mut bench = Bench::default();
        bench.command(connect_to_peer(4, 4, false, b""));
        let conn = done(&bench.out()[0]).handle;
        let syn = bench.sent();
        let mut peer = Peer::new(PORT, syn[0].src_port, 0);
        peer.saw_all(&syn);
        // RST,ACK acknowledging the SYN, as a host with no listener answers.
        let refuse = peer.again(TcpControl::Rst, 0, &[]);
        bench.deliver(refuse);
        let out = bench.out();
        assert_eq!(briefs(&out), [format!("ConnectReply({})", -ECONNREFUSED)]);
        assert_eq!(event(&out[0]).conn, conn);
        assert_eq!(bench.fw.connections(), 0);
    }

    /// The SYN goes again after `rto_initial`; the request after three times the
    /// handshake's round trip (RFC 6298 §2.2), at least `rto_min` and at most
    /// `rto_initial`, or after `rto_initial` when the SYN went again (no sample); twice
    /// that the time after.
    /// With the defaults (1 s, 200 ms) and with neither at its default (300 ms, 500 ms).
    #[test]
    fn the_handshakes_round_trip_sets_the_retransmission_timeout() {
        let configured = Config {
            rto_initial: Duration::from_millis(300),
            rto_min: Duration::from_millis(500),
            ..config()
        };
        for (config, syn_ack_after, syns_again, rto) in [
            (config(), 0, 0, 200),
            (config(), 250, 0, 750),
            (config(), 999, 0, 1_000),
            (config(), 1_500, 1, 1_000),
            (configured, 100, 0, 500),
            (configured, 299, 0, 500),
            (configured, 300, 1, 300),
        ] {
            let mut bench = Bench::with(config);
            connect(&mut bench, false, b"");
            let syn = bench.sent();
            bench.advance(syn_ack_after);
            let again = bench.sent();
            assert_eq!(kinds(&again), vec!["SYN"; syns_again], "{syn_ack_after} ms");
            let mut peer = Peer::new(PORT, syn[0].src_port, 90_000);
            peer.saw_all(&syn);
            bench.deliver(peer.syn());
            let request = bench.sent();
            assert_eq!(kinds(&request), ["ACK", "DATA"]);
            for rto in [rto, 2 * rto] {
                bench.advance(rto - 1);
                assert!(bench.sent().is_empty(), "SYN-ACK after {syn_ack_after} ms");
                bench.advance(1);
                let again = bench.sent();
                assert_eq!(kinds(&again), ["DATA"], "SYN-ACK after {syn_ack_after} ms");
                assert_eq!(again[0].payload, request[1].payload);
            }
        }
    }

    #[test]
    fn syn_retransmissions_run_out_with_etimedout() {
        let mut bench = Bench::default();
        let (tag, _) = connect(&mut bench, false, b"");
        let mut syns = bench.sent().len();
        // 63 s with the defaults (1 + 2 + 4 + 8 + 16 + 32), as Config::syn_timeout says.
        let timeout = bench.fw.config().syn_timeout().total_millis() as i64;
        assert_eq!(timeout, 63_000);
        for _ in 0..timeout - 1 {
            bench.advance(1);
            syns += kinds(&bench.sent()).iter().filter(|k| **k == "SYN").count();
        }
        assert_eq!(syns, 6, "the SYN and five retransmissions");
        assert!(bench.out().is_empty(), "not before syn_timeout");
        bench.advance(1);
        let out = bench.out();
        assert_eq!(briefs(&out), [format!("ConnectReply({})", -ETIMEDOUT)]);
        assert_ne!(tag, 0);
        assert_eq!(bench.fw.counters().connect_timeouts, 1);
        assert_eq!(bench.fw.connections(), 0);
    }

    #[test]
    fn disconnect_gives_up_with_one_connect_reply() {
        let mut bench = Bench::default();
        let (_, conn) = connect(&mut bench, false, b"");
        bench.sent();
        bench.command(Command::Disconnect {
            conn,
            abrupt: false,
        });
        assert_eq!(
            briefs(&bench.out()),
            [
                "DONE(0)".to_string(),
                format!("ConnectReply({})", -ECONNRESET)
            ]
        );
        bench.advance(100_000);
        assert!(bench.out().is_empty());
        assert_eq!(bench.fw.connections(), 0);
    }

    fn connect(bench: &mut Bench, mpa_v1: bool, private_data: &[u8]) -> (u32, u32) {
        let tag = bench.command(connect_to_peer(4, 4, mpa_v1, private_data));
        let out = bench.out();
        (tag, done(&out[0]).handle)
    }
}

mod await_reply {
    use super::*;

    /// RFC 5961 §5.2's lower bound: a reply whose ACK lies further back than any window
    /// the peer can advertise (65535 << 7 here) is a blind injection, dropped.
    #[test]
    fn a_reply_acknowledging_far_in_the_past_is_dropped() {
        let mut bench = Bench::default();
        let (peer, _, _) = active_until_request(&mut bench, true, b"");
        let mut blind = peer.acknowledging(peer.rcv_nxt.wrapping_sub(0x4000_0000));
        bench.deliver(blind.data(&reply(FrameKind::Accept, None, b"")));
        assert!(bench.out().is_empty(), "no CONNECT_REPLY");
        assert_eq!(kinds(&bench.sent()), ["ACK"]);
        assert_eq!(bench.fw.counters().acks_unacceptable, 1);
    }

    #[test]
    fn the_request_is_revision_2_peer_to_peer_offering_write_and_read() {
        let mut bench = Bench::default();
        let (_, _, request) = active_until_request(&mut bench, false, b"hello");
        let frame = parse_mpa(&request);
        assert_eq!(
            (frame.kind, frame.revision, frame.crc, frame.markers),
            (FrameKind::Request, 2, true, false)
        );
        assert_eq!(
            frame.v2,
            block(
                RtrTypes {
                    send: false,
                    write: true,
                    read: true
                },
                16,
                16
            )
        );
        assert_eq!(frame.private_data, b"hello");
    }

    /// The Write RTR the responder picks (siw, cxgb4 and iwnic do when offered both) is
    /// our first FPDU; CONNECT_REPLY comes with its ACK. (The Read RTR's setup, which
    /// waits for a Read Response too: `await_read_response`.)
    #[test]
    fn the_write_rtr_the_responder_picks_is_sent() {
        let (chosen, opcode) = (RtrTypes::WRITE, Opcode::Write);
        let mut bench = Bench::default();
        let (mut peer, conn, _) = active_until_request(&mut bench, false, b"");
        bench.deliver(peer.data(&reply(FrameKind::Accept, block(chosen, 8, 16), b"welcome")));
        let segs = bench.sent();
        assert_eq!(kinds(&segs), ["DATA"], "the RTR acknowledges the reply");
        let ulpdu = FpduRepr::parse(&segs[0].payload).unwrap().ulpdu.to_vec();
        let message = MessageRepr::parse(&ulpdu).unwrap();
        assert_eq!(
            (message.header.opcode, message.rtr_type()),
            (opcode, Some(chosen))
        );
        assert!(
            bench.out().is_empty(),
            "CONNECT_REPLY waits for the RTR's ACK"
        );
        assert_eq!(bench.fw.state(conn), Some(State::AwaitRtrAck));
        assert!(bench.hal.flows.is_empty());
        peer.saw_all(&segs);
        bench.deliver(peer.ack());
        assert!(
            bench.sent().is_empty(),
            "the RTR acknowledged the reply already: FPDU mode without another ACK"
        );
        let out = bench.out();
        assert_eq!(briefs(&out), ["ConnectReply(0)"]);
        let ev = event(&out[0]);
        assert_eq!(
            ev.rtr, chosen,
            "the RTR sent, which the host's RDMAP counts"
        );
        assert_eq!(ev.private_data, b"welcome");
        // Our ORD is relaxed to the responder's IRD (8); our IRD stays 16.
        assert_eq!((ev.ird, ev.ord), (16, 8));
        let flow = bench.hal.flows.values().next().copied().unwrap();
        assert_eq!((flow.snd_nxt, flow.rcv_nxt), (peer.rcv_nxt, peer.snd_nxt));
        assert!(!flow.rtr_expected);
    }

    #[test]
    fn revision_1_connects_without_rtr() {
        let mut bench = Bench::default();
        let (mut peer, _, request) = active_until_request(&mut bench, true, b"v1");
        let frame = parse_mpa(&request);
        assert_eq!((frame.revision, frame.v2), (1, None));
        bench.deliver(peer.data(&reply(FrameKind::Accept, None, b"")));
        assert_eq!(kinds(&bench.sent()), ["ACK"]);
        let out = bench.out();
        assert_eq!(briefs(&out), ["ConnectReply(0)"]);
        assert_eq!(event(&out[0]).rtr, RtrTypes::NONE);
        assert_eq!(bench.hal.flows.len(), 1);
    }

    /// The connection is in FPDU mode at the peer's numbers, nothing left in the
    /// firmware's hands but the entry.
    fn assert_handed_over(bench: &Bench, peer: &Peer, conn: u32) {
        assert_eq!(bench.fw.state(conn), Some(State::Established));
        let flow = bench.hal.flows.values().next().copied().unwrap();
        assert_eq!((flow.snd_nxt, flow.rcv_nxt), (peer.rcv_nxt, peer.snd_nxt));
        assert!(!flow.rtr_expected);
        assert_eq!(bench.fw.buffers_in_use(), 0);
    }

    /// No RTR (revision 1 has none): the reply's ACK, then FPDU mode with our own IRD
    /// and ORD (a revision-1 reply negotiates none).
    #[test]
    fn a_revision_1_answer_to_our_revision_2_request_is_taken() {
        let mut bench = Bench::default();
        let (mut peer, conn, _) = active_until_request(&mut bench, false, b"");
        bench.deliver(peer.data(&reply(FrameKind::Accept, None, b"")));
        let ack = bench.sent();
        assert_eq!(kinds(&ack), ["ACK"]);
        assert_eq!((ack[0].seq, ack[0].ack), (peer.rcv_nxt, Some(peer.snd_nxt)));
        let out = bench.out();
        assert_eq!(briefs(&out), ["ConnectReply(0)"]);
        assert_eq!((event(&out[0]).ird, event(&out[0]).ord), (16, 16));
        assert_handed_over(&bench, &peer, conn);
    }

    /// Each piece is acknowledged as it comes; the RTR follows the last and carries its
    /// ACK; the peer's ACK of the RTR ends the setup.
    #[test]
    fn a_reply_in_pieces() {
        let mut bench = Bench::default();
        let (mut peer, conn, _) = active_until_request(&mut bench, false, b"");
        let whole = reply(FrameKind::Accept, block(RtrTypes::WRITE, 16, 16), b"pieces");
        let pieces: Vec<&[u8]> = whole.chunks(3).collect();
        for piece in &pieces[..pieces.len() - 1] {
            bench.deliver(peer.data(piece));
            let ack = bench.sent();
            assert_eq!(kinds(&ack), ["ACK"]);
            assert_eq!((ack[0].seq, ack[0].ack), (peer.rcv_nxt, Some(peer.snd_nxt)));
        }
        assert!(bench.out().is_empty());
        bench.deliver(peer.data(pieces[pieces.len() - 1]));
        let segs = bench.sent();
        assert_eq!(kinds(&segs), ["DATA"], "the RTR after the last piece");
        assert_eq!(
            (segs[0].seq, segs[0].ack),
            (peer.rcv_nxt, Some(peer.snd_nxt))
        );
        assert_eq!(segs[0].payload, rtr(RtrTypes::WRITE));
        assert!(
            bench.out().is_empty(),
            "CONNECT_REPLY waits for the RTR's ACK"
        );
        peer.saw_all(&segs);
        bench.deliver(peer.ack());
        let out = bench.out();
        assert_eq!(briefs(&out), ["ConnectReply(0)"]);
        assert_eq!(event(&out[0]).private_data, b"pieces");
        assert_handed_over(&bench, &peer, conn);
    }

    #[test]
    fn a_reject_is_connection_refused_with_its_private_data() {
        let mut bench = Bench::default();
        let (mut peer, _, _) = active_until_request(&mut bench, false, b"");
        bench.deliver(peer.data(&reply(
            FrameKind::Reject,
            block(RtrTypes::NONE, 16, 16),
            b"no thanks",
        )));
        let out = bench.out();
        assert_eq!(briefs(&out), [format!("ConnectReply({})", -ECONNREFUSED)]);
        assert_eq!(event(&out[0]).private_data, b"no thanks");
        let segs = bench.sent();
        assert_eq!(kinds(&segs), ["FIN"]);
        peer.saw_all(&segs);
        bench.deliver(peer.fin());
        bench.advance(61_000);
        assert!(bench.out().is_empty(), "exactly one CONNECT_REPLY");
        assert_eq!(bench.fw.connections(), 0);
    }

    /// A reject and the peer's FIN in one segment, as iwnic's own responder sends them:
    /// our FIN acknowledges both, so the close takes one exchange and no retransmission;
    /// an accept that closes at once ends the connection the same way, reset.
    #[test]
    fn a_reply_with_the_peers_fin_is_closed_in_one_exchange() {
        for accept in [false, true] {
            let mut bench = Bench::default();
            let (mut peer, conn, _) = active_until_request(&mut bench, false, b"");
            let (kind, status) = match accept {
                false => (FrameKind::Reject, -ECONNREFUSED),
                true => (FrameKind::Accept, -ECONNRESET),
            };
            let rtr = if accept {
                RtrTypes::READ
            } else {
                RtrTypes::NONE
            };
            bench.deliver(peer.seg(TcpControl::Fin, &reply(kind, block(rtr, 16, 16), b"bye")));
            let out = bench.out();
            assert_eq!(
                briefs(&out),
                [format!("ConnectReply({status})")],
                "{kind:?}"
            );
            let segs = bench.sent();
            assert_eq!(kinds(&segs), ["FIN"], "{kind:?}");
            assert_eq!(
                segs[0].ack,
                Some(peer.snd_nxt),
                "our FIN acknowledges theirs"
            );
            assert_eq!(bench.fw.state(conn), None, "the handle is settled");
            peer.saw_all(&segs);
            bench.deliver(peer.ack());
            assert_eq!(bench.fw.connections(), 0, "{kind:?}");
            bench.advance(61_000);
            assert!(bench.out().is_empty() && bench.sent().is_empty());
            assert_eq!(bench.fw.counters().retransmissions, 0);
        }
    }

    /// A reply that fills the negotiation buffer exactly (512 bytes with its v2 block),
    /// early bytes behind it and a FIN: the FIN is not next in sequence, so it is not
    /// taken (nor the bytes); the close starts from our side.
    #[test]
    fn a_fin_behind_bytes_past_a_full_reply_is_not_taken() {
        let mut bench = Bench::default();
        let (mut peer, _, _) = active_until_request(&mut bench, false, b"");
        let start = peer.snd_nxt;
        let mut segment = reply(FrameKind::Reject, block(RtrTypes::NONE, 16, 16), &[9; 508]);
        let frame_len = segment.len() as u32;
        segment.extend_from_slice(&[0; 8]);
        bench.deliver(peer.seg(TcpControl::Fin, &segment));
        let out = bench.out();
        assert_eq!(briefs(&out), [format!("ConnectReply({})", -ECONNREFUSED)]);
        let segs = bench.sent();
        assert_eq!(kinds(&segs), ["FIN"]);
        assert_eq!(
            segs[0].ack,
            Some(start + frame_len),
            "only the reply is acknowledged"
        );
        assert_eq!(bench.fw.counters().early_data_dropped, 1);
    }

    /// `reply` is refused with a TERMINATE of `code` (acknowledging the reply, at our
    /// next byte), then an RST after it; the connect fails -EINVAL, leaving nothing.
    fn assert_terminated(reply: Vec<u8>, code: u8) -> Bench {
        let mut bench = Bench::default();
        let (mut peer, _, _) = active_until_request(&mut bench, false, b"");
        bench.deliver(peer.data(&reply));
        let segs = bench.sent();
        assert_eq!(kinds(&segs), ["DATA", "RST"]);
        assert_eq!(
            (segs[0].seq, segs[0].ack),
            (peer.rcv_nxt, Some(peer.snd_nxt))
        );
        assert_eq!(terminate_code(&segs[0].payload), code);
        assert_eq!(segs[1].seq, segs[0].seq + segs[0].len());
        assert_eq!(briefs(&bench.out()), [format!("ConnectReply({})", -EINVAL)]);
        assert_eq!(bench.fw.connections(), 0);
        assert!(bench.hal.flows.is_empty());
        assert_eq!(bench.fw.buffers_in_use(), 0);
        bench
    }

    #[test]
    fn an_rtr_type_not_offered_is_terminated_0x07() {
        let bench = assert_terminated(
            reply(FrameKind::Accept, block(RtrTypes::SEND, 16, 16), b""),
            0x07,
        );
        assert_eq!(bench.fw.counters().rtr_mismatch, 1);
    }

    #[test]
    fn an_ord_above_our_ird_is_terminated_0x06() {
        let bench = assert_terminated(
            reply(FrameKind::Accept, block(RtrTypes::READ, 16, 32), b""),
            0x06,
        );
        assert_eq!(bench.fw.counters().ird_shortfall, 1);
    }

    /// 10 s from the request (siw's wait), or as configured.
    #[test]
    fn no_reply_in_time_is_etimedout_and_rst() {
        let configured = Config {
            mpa_reply_timeout: Duration::from_millis(3_000),
            ..config()
        };
        for (config, timeout) in [(config(), 10_000), (configured, 3_000)] {
            let mut bench = Bench::with(config);
            let (mut peer, conn, _) = active_until_request(&mut bench, false, b"");
            bench.deliver(peer.ack());
            bench.advance(timeout - 1);
            assert!(bench.out().is_empty() && bench.sent().is_empty());
            bench.advance(1);
            assert_eq!(
                briefs(&bench.out()),
                [format!("ConnectReply({})", -ETIMEDOUT)]
            );
            let rst = bench.sent();
            assert_eq!(kinds(&rst), ["RST"]);
            assert_eq!((rst[0].seq, rst[0].ack), (peer.rcv_nxt, Some(peer.snd_nxt)));
            assert_eq!(bench.fw.state(conn), None);
            assert_eq!(bench.fw.connections(), 0);
            assert_eq!(bench.fw.counters().mpa_reply_timeouts, 1);
            // The request was acknowledged: its retransmission timer found nothing to
            // send.
            assert_eq!(bench.fw.counters().retransmissions, 0);
        }
    }

    /// spec/mpa.md's first bad-input row on the active side. A reply with a wrong key,
    /// revision 0 or 3, or PD_Length above 512 is taken as none of it: RST at our next
    /// byte, acknowledging only the handshake; the connect's one CONNECT_REPLY is
    /// -EINVAL (rule 4: a protocol error). A truncated reply followed by FIN is the
    /// peer closing mid-reply: its piece acknowledged, the FIN not taken, RST,
    /// -ECONNRESET. Each counted; nothing left.
    #[test]
    fn a_bad_reply_is_reset_with_one_failed_connect_reply() {
        let good = reply(FrameKind::Accept, None, b"");
        let with = |at: usize, byte: u8| {
            let mut bytes = good.clone();
            bytes[at] = byte;
            bytes
        };
        let too_long = [&REPLY_KEY[..], &[0x40, 0x01], &513u16.to_be_bytes()].concat();
        type Counted = fn(&Counters) -> u32;
        let cases: [(Vec<u8>, bool, Counted, i32); 5] = [
            (with(4, b'?'), false, |c| c.mpa_bad_key, -EINVAL),
            (with(17, 0), false, |c| c.mpa_bad_revision, -EINVAL),
            (with(17, 3), false, |c| c.mpa_bad_revision, -EINVAL),
            (too_long, false, |c| c.mpa_private_data_too_long, -EINVAL),
            (good[..10].to_vec(), true, |c| c.mpa_truncated, -ECONNRESET),
        ];
        for (bytes, fin, counted, status) in cases {
            let mut bench = Bench::default();
            let (mut peer, conn, _) = active_until_request(&mut bench, true, b"");
            let handshake_end = peer.snd_nxt;
            bench.deliver(peer.data(&bytes));
            if fin {
                bench.deliver(peer.fin());
            }
            let sent = bench.sent();
            let (expected, acknowledged) = match fin {
                false => (vec!["RST"], handshake_end),
                true => (vec!["ACK", "RST"], peer.snd_nxt - 1),
            };
            assert_eq!(kinds(&sent), expected, "{bytes:?}");
            for seg in &sent {
                assert_eq!((seg.seq, seg.ack), (peer.rcv_nxt, Some(acknowledged)));
            }
            let out = bench.out();
            assert_eq!(
                briefs(&out),
                [format!("ConnectReply({status})")],
                "{bytes:?}"
            );
            assert_eq!(event(&out[0]).conn, conn);
            assert_eq!(counted(bench.fw.counters()), 1, "{bytes:?}");
            assert_eq!(bench.fw.connections(), 0);
            assert_eq!(bench.fw.buffers_in_use(), 0);
            assert!(bench.hal.flow_writes.is_empty());
        }
    }

    #[test]
    fn a_lost_request_is_sent_again() {
        let mut bench = Bench::default();
        let (_, _, request) = active_until_request(&mut bench, false, b"again");
        // The handshake's round trip took no time: the timeout is the 200 ms floor.
        bench.advance(199);
        assert!(bench.sent().is_empty());
        bench.advance(1);
        let again = bench.sent();
        assert_eq!(kinds(&again), ["DATA"]);
        assert_eq!(again[0].payload, request);
    }

    #[test]
    fn rst_is_connection_reset() {
        let mut bench = Bench::default();
        let (peer, _, _) = active_until_request(&mut bench, false, b"");
        bench.deliver(peer.rst());
        assert_eq!(
            briefs(&bench.out()),
            [format!("ConnectReply({})", -ECONNRESET)]
        );
        assert_eq!(bench.fw.connections(), 0);
    }
}

/// The responder chose the Read RTR (irdma's responders do when offered both): our
/// zero-length Read Request waits for its zero-length Read Response, the responder's
/// first FPDU, which the firmware takes before the hand-off (the host never made that
/// Read).
mod await_read_response {
    use super::*;
    use iwnic_proto::ddp::ReadRequestRepr;

    /// The reply choosing Read, our Read RTR read by the peer.
    fn until_read_rtr(bench: &mut Bench) -> Peer {
        let (mut peer, _, _) = active_until_request(bench, false, b"");
        bench.deliver(peer.data(&reply(
            FrameKind::Accept,
            block(RtrTypes::READ, 16, 16),
            b"read",
        )));
        let rtr = bench.sent();
        assert_eq!(kinds(&rtr), ["DATA"]);
        let ulpdu = FpduRepr::parse(&rtr[0].payload).unwrap().ulpdu.to_vec();
        let message = MessageRepr::parse(&ulpdu).unwrap();
        assert_eq!(
            (message.header.opcode, message.rtr_type()),
            (Opcode::ReadRequest, Some(RtrTypes::READ))
        );
        peer.saw_all(&rtr);
        peer
    }

    /// The Read Response into our RTR's sink buffer (STag 0, TO 0).
    fn read_response() -> Vec<u8> {
        fpdu(&MessageRepr::zero_length_read_response(
            &ReadRequestRepr::default(),
        ))
    }

    /// The usual case: the response rides with the RTR's ACK. It is taken, and the
    /// datapath's ACK of the hand-off acknowledges it; the flow starts after it.
    #[test]
    fn the_read_response_with_the_rtrs_ack_is_taken_then_connect_reply() {
        let mut bench = Bench::default();
        let mut peer = until_read_rtr(&mut bench);
        bench.deliver(peer.data(&read_response()));
        let ack = bench.sent();
        assert_eq!(kinds(&ack), ["ACK"], "the datapath's, at the hand-off");
        assert_eq!((ack[0].seq, ack[0].ack), (peer.rcv_nxt, Some(peer.snd_nxt)));
        let out = bench.out();
        assert_eq!(briefs(&out), ["ConnectReply(0)"]);
        assert_eq!(event(&out[0]).private_data, b"read");
        assert_eq!(
            event(&out[0]).rtr,
            RtrTypes::READ,
            "the host's first RDMA Read is message number 2"
        );
        let flow = bench.hal.flows.values().next().copied().unwrap();
        assert_eq!((flow.snd_nxt, flow.rcv_nxt), (peer.rcv_nxt, peer.snd_nxt));
        let counters = bench.fw.counters();
        assert_eq!(
            (
                counters.read_responses_received,
                counters.early_data_dropped
            ),
            (1, 0)
        );
        assert_eq!(bench.fw.buffers_in_use(), 0);
    }

    /// The RTR's ACK alone first: CONNECT_REPLY waits for the response, which the
    /// firmware then acknowledges as it hands the flow over.
    #[test]
    fn after_a_bare_ack_of_the_rtr_the_response_is_waited_for() {
        let mut bench = Bench::default();
        let mut peer = until_read_rtr(&mut bench);
        bench.deliver(peer.ack());
        assert!(bench.out().is_empty() && bench.sent().is_empty());
        assert!(bench.hal.flows.is_empty());
        bench.advance(5_000);
        assert!(bench.out().is_empty() && bench.sent().is_empty());
        bench.deliver(peer.data(&read_response()));
        assert_eq!(kinds(&bench.sent()), ["ACK"]);
        assert_eq!(briefs(&bench.out()), ["ConnectReply(0)"]);
        let flow = bench.hal.flows.values().next().copied().unwrap();
        assert_eq!(flow.rcv_nxt, peer.snd_nxt);
    }

    /// The response before the RTR's ACK (its segment acknowledging only the reply):
    /// taken and acknowledged; the RTR's ACK then hands the flow over.
    #[test]
    fn a_response_before_the_rtrs_ack_is_taken_and_acknowledged() {
        let mut bench = Bench::default();
        let mut peer = until_read_rtr(&mut bench);
        let rtr_end = peer.rcv_nxt;
        let response = read_response();
        let mut early = peer.acknowledging(rtr_end - 48);
        bench.deliver(early.data(&response));
        let ack = bench.sent();
        assert_eq!(kinds(&ack), ["ACK"]);
        assert_eq!(ack[0].ack, Some(peer.snd_nxt + response.len() as u32));
        assert!(bench.out().is_empty());
        peer.snd_nxt += response.len() as u32;
        bench.deliver(peer.ack());
        assert_eq!(briefs(&bench.out()), ["ConnectReply(0)"]);
        let flow = bench.hal.flows.values().next().copied().unwrap();
        assert_eq!((flow.snd_nxt, flow.rcv_nxt), (rtr_end, peer.snd_nxt));
    }

    /// A responder that never answers the Read RTR: the reply timeout's wait, then the
    /// hand-off without it.
    #[test]
    fn no_response_in_time_hands_over_without_it() {
        let mut bench = Bench::default();
        let mut peer = until_read_rtr(&mut bench);
        bench.deliver(peer.ack());
        bench.advance(9_999);
        assert!(bench.out().is_empty());
        bench.advance(1);
        assert_eq!(briefs(&bench.out()), ["ConnectReply(0)"]);
        assert!(bench.sent().is_empty());
        let flow = bench.hal.flows.values().next().copied().unwrap();
        assert_eq!(flow.rcv_nxt, peer.snd_nxt);
        assert_eq!(bench.fw.counters().read_responses_received, 0);
    }

    /// The wait is the reply timeout from the RTR's ACK, not from the peer's latest ACK:
    /// bare ACKs repeating it (window updates, a peer's keepalives) do not put the
    /// hand-off off, or a peer acknowledging every few seconds kept the connect waiting
    /// for good.
    #[test]
    fn repeated_acks_do_not_restart_the_wait() {
        let mut bench = Bench::default();
        let mut peer = until_read_rtr(&mut bench);
        bench.deliver(peer.ack());
        for _ in 0..3 {
            bench.advance(3_000);
            bench.deliver(peer.ack());
            assert!(bench.out().is_empty() && bench.sent().is_empty());
        }
        bench.advance(999);
        assert!(bench.out().is_empty());
        bench.advance(1);
        assert_eq!(
            briefs(&bench.out()),
            ["ConnectReply(0)"],
            "10 s after the RTR's ACK"
        );
        assert!(bench.hal.flows.values().next().is_some());
    }

    /// Another FPDU first (a Send): the wait ends, the FPDU is left to the peer to send
    /// again to the datapath, as early FPDUs are.
    #[test]
    fn another_fpdu_first_ends_the_wait() {
        let mut bench = Bench::default();
        let mut peer = until_read_rtr(&mut bench);
        let start = peer.snd_nxt;
        bench.deliver(peer.data(&fpdu(&MessageRepr::send(b"early", 1))));
        assert_eq!(briefs(&bench.out()), ["ConnectReply(0)"]);
        let flow = bench.hal.flows.values().next().copied().unwrap();
        assert_eq!(flow.rcv_nxt, start, "the Send is not taken");
        let counters = bench.fw.counters();
        assert_eq!(
            (
                counters.read_responses_received,
                counters.early_data_dropped
            ),
            (0, 1)
        );
    }
}

mod await_rtr_ack {
    use super::*;

    fn until_rtr(bench: &mut Bench) -> Peer {
        let (mut peer, _, _) = active_until_request(bench, false, b"");
        bench.deliver(peer.data(&reply(
            FrameKind::Accept,
            block(RtrTypes::WRITE, 16, 16),
            b"",
        )));
        peer.saw_all(&bench.sent());
        peer
    }

    #[test]
    fn a_lost_rtr_is_sent_again() {
        let mut bench = Bench::default();
        until_rtr(&mut bench);
        bench.advance(200);
        let again = bench.sent();
        assert_eq!(kinds(&again), ["DATA"]);
        assert_eq!(
            MessageRepr::parse(FpduRepr::parse(&again[0].payload).unwrap().ulpdu)
                .unwrap()
                .rtr_type(),
            Some(RtrTypes::WRITE)
        );
    }

    #[test]
    fn data_carrying_the_ack_hands_off_and_is_left_to_the_peer_to_resend() {
        let mut bench = Bench::default();
        let mut peer = until_rtr(&mut bench);
        bench.deliver(peer.data(&fpdu(&MessageRepr::send(b"early", 1))));
        assert_eq!(briefs(&bench.out()), ["ConnectReply(0)"]);
        assert_eq!(bench.fw.counters().early_data_dropped, 1);
        let flow = bench.hal.flows.values().next().copied().unwrap();
        assert_ne!(
            flow.rcv_nxt, peer.snd_nxt,
            "the early FPDU is not acknowledged"
        );
    }

    /// Nothing answers the RST; the flow was never handed over; nothing is left.
    #[test]
    fn rst_is_connection_reset() {
        let mut bench = Bench::default();
        let peer = until_rtr(&mut bench);
        bench.deliver(peer.rst());
        assert!(bench.sent().is_empty(), "no RST answers a RST");
        assert_eq!(
            briefs(&bench.out()),
            [format!("ConnectReply({})", -ECONNRESET)]
        );
        assert_eq!(bench.fw.connections(), 0);
        assert_eq!(bench.fw.buffers_in_use(), 0);
        assert!(bench.hal.flow_writes.is_empty());
        assert_eq!(bench.fw.counters().resets_received, 1);
    }
}

/// A connect that finds no free local port for its peer fails -EADDRNOTAVAIL, as the
/// rdma_cm's `cma_alloc_any_port` does when the ephemeral range is used up and TCP's
/// `__inet_check_established` for a bound port whose 4-tuple is taken.
#[test]
fn a_connect_without_a_free_local_port_is_address_not_available() {
    let mut bench = Bench::with(Config {
        ephemeral_port_base: u16::MAX - 1,
        ..config()
    });
    let mut ports = Vec::new();
    for _ in 0..2 {
        bench.command(connect_to_peer(1, 1, false, b""));
        assert_eq!(briefs(&bench.out()), ["DONE(0)"]);
        ports.push(bench.sent()[0].src_port);
    }
    ports.sort();
    assert_eq!(ports, [u16::MAX - 1, u16::MAX]);
    bench.command(connect_to_peer(1, 1, false, b""));
    bench.command(Command::Connect {
        local: iwnic_proto::host::Endpoint::v4(NIC_IP, u16::MAX),
        remote: iwnic_proto::host::Endpoint::v4(PEER_IP, PORT),
        ird: 1,
        ord: 1,
        qpn: 1,
        mpa_v1: false,
        private_data: b"",
    });
    let refused = format!("DONE({})", -iwnic_proto::errno::EADDRNOTAVAIL);
    assert_eq!(briefs(&bench.out()), [refused.clone(), refused]);
    assert_eq!((bench.sent().len(), bench.fw.connections()), (0, 2));
}

#[test]
fn connect_checks_its_arguments() {
    let mut bench = Bench::default();
    let remote = iwnic_proto::host::Endpoint::v4(PEER_IP, PORT);
    let too_long = [0u8; 509];
    for (command, errno) in [
        (connect_to_peer(65, 1, false, b""), EINVAL),
        (connect_to_peer(1, 1, false, &too_long), EINVAL),
        (
            Command::Connect {
                local: iwnic_proto::host::Endpoint::v4([10, 9, 9, 9], 0),
                remote,
                ird: 1,
                ord: 1,
                qpn: 1,
                mpa_v1: false,
                private_data: b"",
            },
            iwnic_proto::errno::EADDRNOTAVAIL,
        ),
    ] {
        bench.command(command);
        assert_eq!(briefs(&bench.out()), [format!("DONE({})", -errno)]);
    }
    // 509 bytes fit revision 1, which has no v2 block.
    bench.command(connect_to_peer(1, 1, true, &too_long));
    assert_eq!(briefs(&bench.out()), ["DONE(0)"]);
    assert!(bench
        .out()
        .iter()
        .all(|o| !matches!(o, Out::Event(e) if e.kind == EventKind::ConnectReply)));
}
