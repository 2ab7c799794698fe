//! Passive opens, per state: SYN_RECEIVED, AWAIT_REQUEST, AWAIT_ACCEPT, AWAIT_RTR, and
//! ESTABLISHED with the reply still buffered.

mod common;

use common::*;
use iwnic_firmware::{Config, FlowEvent, FlowEventKind, State};
use iwnic_proto::errno::{ECONNRESET, ENOBUFS, ETIMEDOUT};
use iwnic_proto::host::{Command, EventKind};
use iwnic_proto::mpa::{FrameKind, RtrTypes};
use iwnic_proto::smoltcp_wire::TcpControl;

fn accept(bench: &mut Bench, conn: u32, private_data: &[u8]) -> u32 {
    bench.command(Command::Accept {
        conn,
        ird: 8,
        ord: 8,
        qpn: 3,
        private_data,
    })
}

mod await_accept {
    use super::*;

    /// The request's ACK is delayed 40 ms: a host that answers sooner sends it on the reply.
    #[test]
    fn the_reply_carries_the_delayed_ack_of_the_request() {
        let mut bench = Bench::default();
        let (peer, request) = passive_until_request(&mut bench, &request_v2(OFFER, 8, 8, b""));
        bench.advance(39);
        assert!(bench.sent().is_empty());
        accept(&mut bench, request.conn, b"");
        let reply = bench.sent();
        assert_eq!(kinds(&reply), ["DATA"]);
        assert_eq!(reply[0].ack, Some(peer.snd_nxt));
        bench.advance(1);
        assert!(bench.sent().is_empty(), "no bare ACK after the reply");
    }

    /// A host that takes longer than the delay: the ACK goes alone, once, and the reply
    /// follows whenever the host answers.
    #[test]
    fn a_slow_host_gets_the_request_acknowledged_alone_after_40_ms() {
        let mut bench = Bench::default();
        let (peer, request) = passive_until_request(&mut bench, &request_v2(OFFER, 8, 8, b""));
        bench.advance(39);
        assert!(bench.sent().is_empty());
        bench.advance(1);
        let ack = bench.sent();
        assert_eq!(kinds(&ack), ["ACK"]);
        assert_eq!(ack[0].ack, Some(peer.snd_nxt));
        bench.advance(10_000);
        assert!(
            bench.sent().is_empty(),
            "one ACK, and no timeout while the host decides"
        );
        accept(&mut bench, request.conn, b"");
        assert_eq!(kinds(&bench.sent()), ["DATA"]);
    }

    /// The peer sends its request again (our ACK is late for it): acknowledged at once.
    #[test]
    fn a_retransmitted_request_is_acknowledged_at_once() {
        let mut bench = Bench::default();
        let bytes = request_v2(OFFER, 8, 8, b"");
        let (peer, _) = passive_until_request(&mut bench, &bytes);
        let seq = peer.snd_nxt - bytes.len() as u32;
        bench.deliver(peer.again(iwnic_proto::smoltcp_wire::TcpControl::Psh, seq, &bytes));
        let ack = bench.sent();
        assert_eq!(kinds(&ack), ["ACK"]);
        assert_eq!(ack[0].ack, Some(peer.snd_nxt));
        assert!(bench.out().is_empty(), "the request is raised once");
        bench.advance(40);
        assert!(
            bench.sent().is_empty(),
            "the delayed ACK went with that one"
        );
    }

    /// With the host queue nearly full, timers wait for the host to drain it: the
    /// request's ACK goes at once instead of waiting with them.
    #[test]
    fn a_nearly_full_host_queue_gets_the_request_acknowledged_at_once() {
        let mut bench = Bench::default();
        let bytes = request_v2(OFFER, 8, 8, b"");
        bench.listen(PORT, 8);
        // Room for one input's records: after the CONNECT_REQUEST, less than that.
        bench.hal.host_room = 3;
        let mut peer = Peer::new(40000, PORT, 7_000);
        bench.deliver(peer.syn());
        peer.saw_all(&bench.sent());
        bench.deliver(peer.ack());
        bench.deliver(peer.data(&bytes));
        let ack = bench.sent();
        assert_eq!(kinds(&ack), ["ACK"]);
        assert_eq!(ack[0].ack, Some(peer.snd_nxt));
    }

    /// The RTR ends the accept whichever judges it: the datapath, which takes an RTR
    /// that comes whole as iwnic sends it, or the firmware, which gets every other
    /// (here, the same bytes steered to it).
    #[test]
    fn v2_peer_to_peer_established_waits_for_the_rtr() {
        for (taken_by_datapath, deliver_rtr) in [
            (true, Bench::arrive as fn(&mut Bench, Vec<u8>)),
            (false, Bench::deliver),
        ] {
            let mut bench = Bench::default();
            let (mut peer, request) =
                passive_until_request(&mut bench, &request_v2(OFFER, 16, 12, b"hi"));
            assert_eq!(
                (request.ird, request.ord, request.private_data.as_slice()),
                (16, 12, &b"hi"[..])
            );
            assert_eq!(request.remote.port, 40000);
            let tag = accept(&mut bench, request.conn, b"ok");
            let reply = bench.sent();
            assert_eq!(kinds(&reply), ["DATA"]);
            let frame = parse_mpa(&reply[0].payload);
            assert_eq!(frame.kind, FrameKind::Accept);
            let block = frame.v2.unwrap();
            assert!(block.peer_to_peer);
            assert_eq!(
                block.rtr,
                RtrTypes::WRITE,
                "a zero-length Write is preferred, as siw's and cxgb4's responders choose"
            );
            // Our ORD is relaxed to the initiator's IRD; our IRD is what the host asked.
            assert_eq!(
                (block.ird, block.ord, frame.private_data),
                (8, 8, &b"ok"[..])
            );
            peer.saw_all(&reply);
            // The flow is handed over at the byte after the reply, RTR expected.
            let flow = bench.hal.flow_writes.last().copied().unwrap();
            assert!(flow.rtr_expected && flow.crc);
            assert_eq!(
                (flow.snd_nxt, flow.rcv_nxt),
                (reply[0].seq + reply[0].len(), peer.snd_nxt)
            );
            assert_eq!(flow.tuple.remote_port, 40000);
            let out = bench.out();
            assert_eq!(briefs(&out), ["DONE(0)"], "the accept completes at once");
            assert_eq!(done(&out[0]).tag, tag);
            assert_eq!(bench.fw.state(request.conn), Some(State::AwaitRtr));

            let sent_before = bench.fw.counters().frames_sent;
            let writes_before = bench.hal.flow_writes.len();
            deliver_rtr(&mut bench, peer.data(&rtr(RtrTypes::WRITE)));
            let ack = bench.sent();
            assert_eq!(kinds(&ack), ["ACK"]);
            assert_eq!(ack[0].ack, Some(peer.snd_nxt));
            assert_eq!(
                bench.fw.counters().frames_sent,
                sent_before,
                "the datapath sends the RTR's ACK"
            );
            let flow = bench.hal.flows[&flow.index];
            assert!(!flow.rtr_expected);
            assert_eq!(flow.rcv_nxt, peer.snd_nxt, "FPDU mode starts after the RTR");
            assert_eq!(
                bench.hal.flow_writes.len() - writes_before,
                usize::from(!taken_by_datapath),
                "the firmware rewrites the flow only when it judged the RTR"
            );
            let out = bench.out();
            assert_eq!(
                briefs(&out),
                ["Established(0)"],
                "ESTABLISHED waits for the RTR"
            );
            assert_eq!((event(&out[0]).ird, event(&out[0]).ord), (8, 8));
            assert_eq!(bench.fw.state(request.conn), Some(State::Established));
            assert_eq!(
                bench.fw.buffers_in_use(),
                0,
                "reply acknowledged by the RTR"
            );
        }
    }

    #[test]
    fn each_offered_rtr_type_is_honoured() {
        for (offer, chosen) in [
            (RtrTypes::SEND, RtrTypes::SEND),
            (RtrTypes::WRITE, RtrTypes::WRITE),
            (
                RtrTypes {
                    send: true,
                    write: true,
                    read: false,
                },
                RtrTypes::WRITE,
            ),
            (OFFER, RtrTypes::WRITE),
        ] {
            let mut bench = Bench::default();
            let (mut peer, request) =
                passive_until_request(&mut bench, &request_v2(offer, 4, 4, b""));
            accept(&mut bench, request.conn, b"");
            let reply = bench.sent();
            assert_eq!(kinds(&reply), ["DATA"]);
            assert_eq!(reply[0].ack, Some(peer.snd_nxt));
            // Our ORD relaxed to the initiator's IRD (4).
            let block = parse_mpa(&reply[0].payload).v2.unwrap();
            assert_eq!(
                (block.rtr, block.ird, block.ord),
                (chosen, 8, 4),
                "{offer:?}"
            );
            peer.saw_all(&reply);
            bench.arrive(peer.data(&rtr(chosen)));
            // The datapath took the RTR: its ACK, at the byte after the reply.
            let ack = bench.sent();
            assert_eq!(kinds(&ack), ["ACK"], "offer {offer:?}");
            assert_eq!((ack[0].seq, ack[0].ack), (peer.rcv_nxt, Some(peer.snd_nxt)));
            let out = bench.out();
            assert_eq!(briefs(&out), ["DONE(0)", "Established(0)"], "{offer:?}");
            assert_eq!((event(&out[1]).ird, event(&out[1]).ord), (8, 4));
            assert_eq!(
                event(&out[1]).rtr,
                chosen,
                "the RTR the host's RDMAP counts"
            );
            let flow = bench.hal.flows.values().next().copied().unwrap();
            assert_eq!((flow.snd_nxt, flow.rcv_nxt), (peer.rcv_nxt, peer.snd_nxt));
            assert!(!flow.rtr_expected);
            assert_eq!(
                bench.hal.flow_writes.len(),
                1,
                "written once, at the accept"
            );
            assert_eq!(bench.fw.state(request.conn), Some(State::Established));
            assert_eq!(bench.fw.buffers_in_use(), 0);
        }
    }

    #[test]
    fn v1_request_gets_a_v1_reply_and_established_at_once() {
        let mut bench = Bench::default();
        let (_peer, request) = passive_until_request(&mut bench, &request_v1(b"v1"));
        // No IRD/ORD negotiation in revision 1: the request offers the device's limits,
        // which an accept may pass back as they are (its ird as our ord).
        let limits = (bench.fw.config().max_ord, bench.fw.config().max_ird);
        assert_eq!((request.ird, request.ord), limits);
        accept(&mut bench, request.conn, b"yes");
        let reply = bench.sent();
        let frame = parse_mpa(&reply[0].payload);
        assert_eq!(
            (frame.revision, frame.v2, frame.private_data),
            (1, None, &b"yes"[..])
        );
        assert!(!bench.hal.flow_writes.last().unwrap().rtr_expected);
        let out = bench.out();
        assert_eq!(briefs(&out), ["DONE(0)", "Established(0)"]);
        assert_eq!(event(&out[1]).rtr, RtrTypes::NONE, "no RTR in revision 1");
    }

    /// Without the peer-to-peer bit the reply sets no RTR type, whatever types the
    /// request's block carries (they mean nothing without it).
    #[test]
    fn v2_without_peer_to_peer_needs_no_rtr() {
        let write_and_read = RtrTypes {
            send: false,
            write: true,
            read: true,
        };
        for offered in [RtrTypes::NONE, write_and_read] {
            let mut bench = Bench::default();
            let mut request = request_v2(offered, 4, 4, b"");
            request[20] &= 0x7F; // the P bit, top of the block's IRD word
            let (_peer, request) = passive_until_request(&mut bench, &request);
            accept(&mut bench, request.conn, b"");
            let frame_bytes = bench.sent()[0].payload.clone();
            let block = parse_mpa(&frame_bytes).v2.unwrap();
            assert!(!block.peer_to_peer);
            assert_eq!(block.rtr, RtrTypes::NONE, "offered {offered:?}");
            let out = bench.out();
            assert_eq!(briefs(&out), ["DONE(0)", "Established(0)"]);
            assert_eq!(event(&out[1]).rtr, RtrTypes::NONE, "offered {offered:?}");
        }
    }

    #[test]
    fn a_read_rtr_raises_an_ird_of_0_to_1() {
        // The initiator's zero-length Read is an RDMA Read Request to us.
        let mut bench = Bench::default();
        let (_peer, request) =
            passive_until_request(&mut bench, &request_v2(RtrTypes::READ, 16, 16, b""));
        bench.command(Command::Accept {
            conn: request.conn,
            ird: 0,
            ord: 4,
            qpn: 3,
            private_data: b"",
        });
        let reply = bench.sent()[0].payload.clone();
        let block = parse_mpa(&reply).v2.unwrap();
        assert_eq!((block.rtr, block.ird, block.ord), (RtrTypes::READ, 1, 4));
    }

    #[test]
    fn reject_sends_r_with_private_data_then_closes_quietly() {
        let mut bench = Bench::default();
        let (mut peer, request) =
            passive_until_request(&mut bench, &request_v2(OFFER, 16, 16, b""));
        bench.command(Command::Reject {
            conn: request.conn,
            private_data: b"go away",
        });
        assert_eq!(briefs(&bench.out()), ["DONE(0)"]);
        let segs = bench.sent();
        assert_eq!(kinds(&segs), ["FIN"], "reply and FIN in one segment");
        let frame = parse_mpa(&segs[0].payload);
        assert_eq!(
            (frame.kind, frame.private_data),
            (FrameKind::Reject, &b"go away"[..])
        );
        peer.saw_all(&segs);
        // The handle is dead to the host.
        assert_eq!(bench.fw.state(request.conn), None);
        bench.deliver(peer.fin());
        assert_eq!(kinds(&bench.sent()), ["ACK"]);
        bench.advance(60_001);
        assert!(bench.out().is_empty(), "no event after reject (rule 3)");
        assert_eq!(bench.fw.connections(), 0);
        assert_eq!(bench.fw.counters().mpa_rejects_sent, 1);
    }

    /// irdma's initiator runs every revision-2 reply through
    /// `irdma_negotiate_mpa_v2_ird_ord` before it looks at R: a block without the
    /// peer-to-peer bit or without an RTR type fails (-EOPNOTSUPP), as does one whose ORD
    /// exceeds the initiator's IRD (-EINVAL), and `irdma_handle_rcv_mpa` then resets
    /// the connection (`irdma_active_open_err`): the application never sees the reject
    /// or its private data. So the reject's block reads as an accept's would: the
    /// peer-to-peer bit and the one RTR type we would have chosen, and the initiator's
    /// IRD and ORD crossed (our IRD its ORD, our ORD its IRD), as siw's reject carries.
    #[test]
    fn reject_carries_a_v2_block_an_irdma_initiator_takes() {
        let mut bench = Bench::default();
        // irdma's request: peer-to-peer offering Write and Read, IRD 4, ORD 16.
        let (mut peer, request) = passive_until_request(&mut bench, &request_v2(OFFER, 4, 16, b""));
        bench.command(Command::Reject {
            conn: request.conn,
            private_data: b"busy",
        });
        assert_eq!(briefs(&bench.out()), ["DONE(0)"]);
        let segs = bench.sent();
        assert_eq!(kinds(&segs), ["FIN"]);
        let frame = parse_mpa(&segs[0].payload);
        assert_eq!(
            (frame.kind, frame.revision, frame.private_data),
            (FrameKind::Reject, 2, &b"busy"[..])
        );
        let block = frame.v2.expect("the request's v2 block answered");
        assert!(block.peer_to_peer, "irdma needs the peer-to-peer bit");
        assert_eq!(
            block.rtr,
            RtrTypes::WRITE,
            "one RTR type, as an accept picks"
        );
        assert_eq!((block.ird, block.ord), (16, 4), "IRD and ORD crossed");
        peer.saw_all(&segs);
    }

    #[test]
    /// The kernel's iw_cm has no CLOSE for an id in CONN_RECV: the host learns of the
    /// death when it answers the request.
    fn bytes_before_the_reply_close_and_the_answer_fails() {
        let mut bench = Bench::default();
        let (mut peer, request) =
            passive_until_request(&mut bench, &request_v2(OFFER, 16, 16, b""));
        bench.deliver(peer.data(b"extra"));
        assert_eq!(kinds(&bench.sent()), ["RST"]);
        assert!(bench.out().is_empty(), "no event in CONN_RECV");
        assert_eq!(bench.fw.counters().mpa_extra_bytes, 1);
        assert_eq!(bench.fw.connections(), 0);
        // Accept on the dead connection: it died underneath.
        accept(&mut bench, request.conn, b"");
        assert_eq!(briefs(&bench.out()), [format!("DONE({})", -ECONNRESET)]);
    }

    #[test]
    fn rst_fails_the_later_reject() {
        let mut bench = Bench::default();
        let (peer, request) = passive_until_request(&mut bench, &request_v2(OFFER, 16, 16, b""));
        bench.deliver(peer.rst());
        assert!(bench.sent().is_empty(), "no RST answers a RST");
        assert!(bench.out().is_empty(), "no event in CONN_RECV");
        assert_eq!(bench.fw.connections(), 0);
        bench.command(Command::Reject {
            conn: request.conn,
            private_data: b"",
        });
        assert_eq!(briefs(&bench.out()), [format!("DONE({})", -ECONNRESET)]);
    }
}

/// Revision 1 is in FPDU mode at the accept, the reply perhaps not yet acknowledged: the
/// firmware keeps it until the datapath's `snd_una` passes it.
mod established_reply_buffered {
    use super::*;

    fn until_reply(bench: &mut Bench) -> Peer {
        let (mut peer, request) = passive_until_request(bench, &request_v1(b""));
        accept(bench, request.conn, b"");
        peer.saw_all(&bench.sent());
        assert_eq!(briefs(&bench.out()), ["DONE(0)", "Established(0)"]);
        assert_eq!(bench.fw.buffers_in_use(), 1);
        peer
    }

    #[test]
    fn the_reply_is_sent_again_until_the_datapath_sees_it_acknowledged() {
        let mut bench = Bench::default();
        let peer = until_reply(&mut bench);
        bench.advance(200);
        let again = bench.sent();
        assert_eq!(kinds(&again), ["DATA"]);
        assert_eq!(again[0].seq.wrapping_add(again[0].len()), peer.rcv_nxt);
        acknowledged_on_the_datapath_goes_quiet(&mut bench, 2000);
    }

    /// With every buffer held, replies the datapath has seen acknowledged give theirs
    /// back at once instead of at their owners' next RTO; unacknowledged ones keep them.
    #[test]
    fn acknowledged_replies_are_reclaimed_when_the_buffers_run_out() {
        const BUFFERS: u16 = 8; // Fw's
        let mut bench = Bench::default();
        bench.listen(PORT, 64);
        let accept_from = |bench: &mut Bench, port: u16| {
            let mut peer = Peer::new(port, PORT, 5);
            bench.deliver(peer.syn());
            peer.saw_all(&bench.sent());
            bench.deliver(peer.ack());
            bench.deliver(peer.data(&request_v1(b"")));
            let conn = event(&bench.out()[0]).conn;
            accept(bench, conn, b"");
            peer.saw_all(&bench.sent());
            briefs(&bench.out())
        };
        for n in 0..BUFFERS {
            assert_eq!(
                accept_from(&mut bench, 41000 + n),
                ["DONE(0)", "Established(0)"]
            );
        }
        assert_eq!(
            accept_from(&mut bench, 42000),
            [format!("DONE({})", -ENOBUFS)],
            "no reply acknowledged yet: nothing to take back"
        );
        for flow in bench.hal.flows.values_mut() {
            flow.snd_una = flow.snd_nxt;
        }
        assert_eq!(
            accept_from(&mut bench, 42001),
            ["DONE(0)", "Established(0)"]
        );
        assert_eq!(bench.fw.counters().buffers_reclaimed, u32::from(BUFFERS));
        assert_eq!(bench.fw.buffers_in_use(), 1);
        for flow in bench.hal.flows.values_mut() {
            flow.snd_una = flow.snd_nxt;
        }
        bench.advance(60_000);
        assert!(bench.sent().is_empty(), "nothing sent again");
        assert_eq!(bench.fw.buffers_in_use(), 0);
    }

    /// A datapath that holds no context for the flow cannot say what was acknowledged:
    /// the buffer goes back to the pool instead of waiting for the close.
    #[test]
    fn a_flow_the_datapath_lost_frees_the_reply_buffer() {
        let mut bench = Bench::default();
        until_reply(&mut bench);
        bench.hal.flows.clear();
        bench.advance(1000);
        assert!(bench.sent().is_empty());
        assert_eq!(bench.fw.buffers_in_use(), 0);
        assert_eq!(bench.fw.counters().retransmissions, 0);
    }
}

mod await_rtr {
    use super::*;

    /// The connection died before its RTR: ESTABLISHED, then CLOSE with `status` (rule 5:
    /// never CLOSE alone, as siw raises for a connection lost while accepting); the
    /// connection and its flow are gone.
    fn assert_established_then_closed(bench: &mut Bench, status: i32) {
        assert_eq!(
            briefs(&bench.out()),
            ["Established(0)".to_string(), format!("Close({status})")]
        );
        assert!(bench.hal.flows.is_empty(), "the flow is taken back");
        assert_eq!(bench.fw.connections(), 0);
    }

    /// The reply sent and the accept completed at once: no host thread waits for the
    /// initiator's RTR, which raises ESTABLISHED.
    fn until_reply(bench: &mut Bench) -> (Peer, u32) {
        let (mut peer, request) = passive_until_request(bench, &request_v2(OFFER, 16, 16, b""));
        let tag = accept(bench, request.conn, b"");
        let out = bench.out();
        assert_eq!(briefs(&out), ["DONE(0)"]);
        assert_eq!(done(&out[0]).tag, tag);
        let reply = bench.sent();
        peer.saw_all(&reply);
        (peer, request.conn)
    }

    #[test]
    fn a_lost_reply_is_sent_again() {
        let mut bench = Bench::default();
        let (peer, _) = until_reply(&mut bench);
        // The handshake's round trip took no time: the timeout is the 200 ms floor.
        bench.advance(199);
        assert!(bench.sent().is_empty());
        bench.advance(1);
        let again = bench.sent();
        assert_eq!(kinds(&again), ["DATA"]);
        assert_eq!(again[0].seq.wrapping_add(again[0].len()), peer.rcv_nxt);
        assert_eq!(bench.fw.counters().retransmissions, 1);
    }

    #[test]
    fn an_rtr_with_a_bad_crc_is_terminated_and_closes_the_connection() {
        let mut bench = Bench::default();
        let (mut peer, _) = until_reply(&mut bench);
        let mut bad = rtr(RtrTypes::WRITE);
        bad[5] ^= 1;
        bench.deliver(peer.data(&bad));
        let segs = bench.sent();
        assert_eq!(kinds(&segs), ["DATA", "RST"]);
        assert_eq!(terminate_code(&segs[0].payload), 0x02);
        assert_established_then_closed(&mut bench, -ECONNRESET);
    }

    #[test]
    fn an_rtr_of_another_type_is_terminated_0x07() {
        let mut bench = Bench::default();
        let (mut peer, _) = until_reply(&mut bench);
        bench.deliver(peer.data(&rtr(RtrTypes::READ)));
        let segs = bench.sent();
        assert_eq!(terminate_code(&segs[0].payload), 0x07);
        assert_eq!(bench.fw.counters().rtr_mismatch, 1);
    }

    /// The datapath takes an RTR of any type; the firmware holds it to the agreed one.
    /// The TERMINATE follows the datapath's ACK of the RTR, at its numbers.
    #[test]
    fn a_taken_rtr_of_another_type_is_terminated_0x07() {
        let mut bench = Bench::default();
        let (mut peer, _) = until_reply(&mut bench);
        bench.arrive(peer.data(&rtr(RtrTypes::READ)));
        let segs = bench.sent();
        assert_eq!(kinds(&segs), ["ACK", "DATA", "RST"]);
        assert_eq!(terminate_code(&segs[1].payload), 0x07);
        assert_eq!(
            (segs[1].seq, segs[1].ack),
            (peer.rcv_nxt, Some(peer.snd_nxt))
        );
        assert_eq!(bench.fw.counters().rtr_mismatch, 1);
        assert_established_then_closed(&mut bench, -ECONNRESET);
    }

    /// The datapath has one report register: a second report waits for the firmware to
    /// read the first, and every flow's receive waits behind it. So the firmware takes
    /// the reports while the host queue has no room for the records they raise, and
    /// raises them, in order, once the host has made room.
    #[test]
    fn reports_are_taken_while_the_host_queue_is_full() {
        let mut bench = Bench::default();
        bench.listen(PORT, 8);
        let mut accepted = Vec::new();
        for port in [41_000, 41_001] {
            let (mut peer, _, out) = request_from(&mut bench, port);
            let conn = event(&out[0]).conn;
            bench.command(accept_command(conn));
            assert_eq!(briefs(&bench.out()), ["DONE(0)"]);
            peer.saw_all(&bench.sent());
            accepted.push((peer, conn));
        }
        bench.hal.host_room = 0;
        for (peer, _) in &mut accepted {
            bench.arrive(peer.data(&rtr(RtrTypes::WRITE)));
        }
        assert_eq!(kinds(&bench.sent()), ["ACK", "ACK"], "the datapath's");
        assert!(bench.hal.flow_events.is_empty(), "every report taken");
        assert!(bench.hal.records.is_empty());
        bench.hal.host_room = 64;
        bench.poll();
        let out = bench.out();
        assert_eq!(briefs(&out), ["Established(0)", "Established(0)"]);
        let conns: Vec<u32> = out.iter().map(|e| event(e).conn).collect();
        assert_eq!(conns, accepted.iter().map(|(_, c)| *c).collect::<Vec<_>>());
        assert_eq!(bench.fw.buffers_in_use(), 0);
    }

    /// The firmware holds as many reports as it has negotiation buffers (8 here); the
    /// rest wait in the datapath. Once the host has made room every report is handled, in
    /// the order the datapath raised them, and every connection closes.
    #[test]
    fn reports_beyond_what_the_firmware_holds_wait_in_the_datapath() {
        let mut bench = Bench::default();
        bench.listen(PORT, 16);
        let mut conns = Vec::new();
        for port in 41_000..41_010 {
            let (mut peer, _, out) = request_from(&mut bench, port);
            let conn = event(&out[0]).conn;
            bench.command(accept_command(conn));
            peer.saw_all(&bench.sent());
            bench.arrive(peer.data(&rtr(RtrTypes::WRITE)));
            assert_eq!(kinds(&bench.sent()), ["ACK"], "the datapath's");
            assert_eq!(briefs(&bench.out()), ["DONE(0)", "Established(0)"]);
            conns.push(conn);
        }
        bench.hal.host_room = 0;
        let mut indices: Vec<u16> = bench.hal.flows.keys().copied().collect();
        indices.reverse();
        for &index in &indices {
            let kind = FlowEventKind::CrcError;
            bench.hal.flow_events.push_back(FlowEvent { index, kind });
        }
        bench.poll();
        assert_eq!(bench.hal.flow_events.len(), 2, "eight held");
        bench.hal.host_room = 64;
        bench.poll();
        let out = bench.out();
        assert_eq!(briefs(&out), vec![format!("Close({})", -ECONNRESET); 10]);
        let closed: Vec<u16> = out.iter().map(|e| event(e).conn as u16).collect();
        assert_eq!(closed, indices, "in the order raised");
        assert_eq!(bench.fw.counters().crc_errors, 10);
        assert_eq!(bench.fw.connections(), 0);
        assert!(conns.iter().all(|&c| bench.fw.state(c).is_none()));
    }

    /// The RTR's ACK covered the reply: its timer is gone and its buffer free.
    #[test]
    fn a_taken_rtr_leaves_nothing_to_send_again() {
        let mut bench = Bench::default();
        let (mut peer, conn) = until_reply(&mut bench);
        bench.arrive(peer.data(&rtr(RtrTypes::WRITE)));
        bench.sent();
        assert_eq!(briefs(&bench.out()), ["Established(0)"]);
        assert_eq!(bench.fw.buffers_in_use(), 0);
        bench.advance(60_000);
        assert!(bench.sent().is_empty());
        assert!(bench.out().is_empty());
        assert_eq!(bench.fw.state(conn), Some(State::Established));
        assert_eq!(bench.fw.counters().retransmissions, 0);
    }

    /// The datapath reports the RTR before it queues the frames after it, and the
    /// firmware takes its reports before each frame: a FIN right behind the RTR finds
    /// the connection established and is taken at the numbers past the RTR.
    #[test]
    fn a_fin_behind_a_taken_rtr_finds_the_connection_established() {
        let mut bench = Bench::default();
        let (mut peer, conn) = until_reply(&mut bench);
        bench.hal.arrive(peer.data(&rtr(RtrTypes::WRITE)));
        bench.hal.arrive(peer.fin());
        bench.poll();
        let segs = bench.sent();
        assert_eq!(kinds(&segs), ["ACK", "FIN"]);
        assert_eq!(
            (segs[1].seq, segs[1].ack),
            (peer.rcv_nxt, Some(peer.snd_nxt))
        );
        assert_eq!(briefs(&bench.out()), ["Established(0)", "Disconnect(0)"]);
        assert_eq!(bench.fw.state(conn), Some(State::LastAck));
    }

    /// The host may end the connection before the firmware sees the datapath's report:
    /// the RST goes at the datapath's numbers (past the RTR), the report is then stale.
    #[test]
    fn a_report_after_the_connection_ended_is_ignored() {
        let mut bench = Bench::default();
        let (mut peer, conn) = until_reply(&mut bench);
        bench.hal.arrive(peer.data(&rtr(RtrTypes::WRITE)));
        bench.command(Command::Release { conn });
        let segs = bench.sent();
        assert_eq!(kinds(&segs), ["ACK", "RST"]);
        assert_eq!(segs[1].seq, peer.rcv_nxt);
        assert_eq!(
            briefs(&bench.out()),
            ["DONE(0)"],
            "the released id hears nothing"
        );
        assert!(bench.hal.flow_events.is_empty(), "the report was taken");
        assert_eq!(bench.fw.connections(), 0);
        assert!(bench.hal.flows.is_empty());
    }

    /// A peer may send the whole RTR again after a piece of it reached the firmware:
    /// the datapath takes it at the receive point the flow was written with, behind
    /// what the firmware had collected.
    #[test]
    fn an_rtr_sent_whole_after_a_piece_is_taken_at_the_flows_numbers() {
        let mut bench = Bench::default();
        let (mut peer, conn) = until_reply(&mut bench);
        let start = peer.snd_nxt;
        let whole = rtr(RtrTypes::WRITE);
        bench.deliver(peer.data(&whole[..7]));
        let ack = bench.sent();
        assert_eq!(ack[0].ack, Some(start + 7), "the firmware took the piece");
        bench.arrive(peer.again(TcpControl::Psh, start, &whole));
        assert_eq!(briefs(&bench.out()), ["Established(0)"]);
        assert_eq!(bench.fw.buffers_in_use(), 0);
        peer.snd_nxt = start + whole.len() as u32;
        peer.saw_all(&bench.sent());
        bench.command(Command::Disconnect {
            conn,
            abrupt: false,
        });
        let fin = bench.sent();
        assert_eq!(kinds(&fin), ["FIN"]);
        assert_eq!((fin[0].seq, fin[0].ack), (peer.rcv_nxt, Some(peer.snd_nxt)));
    }

    #[test]
    fn an_rtr_in_pieces_is_collected() {
        let mut bench = Bench::default();
        let (mut peer, _) = until_reply(&mut bench);
        let whole = rtr(RtrTypes::WRITE);
        for piece in whole.chunks(7) {
            bench.deliver(peer.data(piece));
        }
        assert_eq!(briefs(&bench.out()), ["Established(0)"]);
    }

    #[test]
    fn no_rtr_in_time_closes_the_connection() {
        let mut bench = Bench::default();
        let (mut peer, _) = until_reply(&mut bench);
        // The peer acknowledges the reply but never sends the rest of the RTR.
        bench.deliver(peer.ack());
        bench.deliver(peer.data(&rtr(RtrTypes::WRITE)[..7]));
        bench.sent();
        bench.advance(10_000);
        let rst = bench.sent();
        assert_eq!(kinds(&rst), ["RST"]);
        // At the firmware's sequence numbers, which moved past the flow context written
        // at accept (every segment came to the firmware while the RTR was expected).
        assert_eq!((rst[0].seq, rst[0].ack), (peer.rcv_nxt, Some(peer.snd_nxt)));
        // The retransmission timer ran out first with the reply acknowledged: nothing
        // was sent again, only the phase timer was left.
        assert_eq!(bench.fw.counters().retransmissions, 0);
        assert_established_then_closed(&mut bench, -ETIMEDOUT);
    }

    /// A host that does not wait for ESTABLISHED before it disconnects (the driver
    /// does, as the kernel's iw_cm): the setup is given up, and the one input raises
    /// three records.
    #[test]
    fn a_disconnect_before_the_rtr_closes_the_connection() {
        let mut bench = Bench::default();
        let (peer, conn) = until_reply(&mut bench);
        bench.hal.host_room = 3;
        let tag = bench.command(Command::Disconnect {
            conn,
            abrupt: false,
        });
        let out = bench.out();
        assert_eq!(
            briefs(&out),
            [
                "DONE(0)".to_string(),
                "Established(0)".to_string(),
                format!("Close({})", -ECONNRESET)
            ]
        );
        assert_eq!(done(&out[0]).tag, tag);
        let rst = bench.sent();
        assert_eq!(kinds(&rst), ["RST"]);
        assert_eq!(rst[0].seq, peer.rcv_nxt);
        assert_eq!(bench.fw.connections(), 0);
    }

    #[test]
    fn an_rst_before_the_rtr_closes_the_connection() {
        let mut bench = Bench::default();
        let (mut peer, _) = until_reply(&mut bench);
        // A piece of the RTR moves rcv_nxt on: an RST behind it is old and ignored (the
        // firmware's numbers count, not the context written at accept).
        let start = peer.snd_nxt;
        bench.deliver(peer.data(&rtr(RtrTypes::WRITE)[..7]));
        bench.deliver(peer.again(TcpControl::Rst, start + 1, &[]));
        assert!(bench.out().is_empty());
        bench.deliver(peer.rst());
        assert_established_then_closed(&mut bench, -ECONNRESET);
    }
}

/// An initiator that offers only the Read RTR (cxgb4's default): its zero-length Read
/// Request is an RDMA Read like any other and waits in its outstanding reads for a Read
/// Response, which the firmware sends as our first FPDU. The flow goes to the datapath
/// only with it, so the RTR comes to the firmware.
mod await_read_rtr {
    use super::*;
    use iwnic_proto::ddp::{Body, HeaderRepr, MessageRepr, Opcode, Placement, ReadRequestRepr};
    use iwnic_proto::fpdu::FpduRepr;

    const SINK_STAG: u32 = 0x0A0B_0C0D;
    const SINK_TO: u64 = 0x1122_3344_5566_7788;

    /// The Read RTR with a sink buffer of its own, as another stack may send it (siw
    /// puts a 1 in the STag hardware may treat specially).
    fn read_rtr() -> Vec<u8> {
        fpdu(&MessageRepr {
            header: HeaderRepr {
                last: true,
                opcode: Opcode::ReadRequest,
                placement: Placement::Untagged {
                    inv_stag: 0,
                    qn: 1,
                    msn: 1,
                    mo: 0,
                },
            },
            body: Body::ReadRequest(ReadRequestRepr {
                sink_stag: SINK_STAG,
                sink_to: SINK_TO,
                size: 0,
                source_stag: 1,
                source_to: 0,
            }),
        })
    }

    /// The reply (choosing Read), the flow not yet handed over.
    fn until_reply(bench: &mut Bench) -> (Peer, u32) {
        let (mut peer, request) =
            passive_until_request(bench, &request_v2(RtrTypes::READ, 16, 16, b""));
        accept(bench, request.conn, b"");
        assert_eq!(briefs(&bench.out()), ["DONE(0)"]);
        let reply = bench.sent();
        let block = parse_mpa(&reply[0].payload).v2.unwrap();
        assert_eq!(block.rtr, RtrTypes::READ);
        peer.saw_all(&reply);
        assert!(bench.hal.flows.is_empty(), "no flow before the RTR");
        (peer, request.conn)
    }

    /// The zero-length Read Response to `read_rtr`, checked byte for byte.
    fn assert_read_response(payload: &[u8]) {
        let fpdu = FpduRepr::parse(payload).expect("one FPDU with a good CRC");
        assert_eq!(payload.len(), 20);
        let message = MessageRepr::parse(fpdu.ulpdu).unwrap();
        assert_eq!(
            message,
            MessageRepr {
                header: HeaderRepr {
                    last: true,
                    opcode: Opcode::ReadResponse,
                    placement: Placement::Tagged {
                        stag: SINK_STAG,
                        to: SINK_TO,
                    },
                },
                body: Body::Payload(&[]),
            }
        );
    }

    #[test]
    fn the_rtr_is_answered_with_a_zero_length_read_response_then_established() {
        for in_pieces in [false, true] {
            let mut bench = Bench::default();
            let (mut peer, conn) = until_reply(&mut bench);
            let reply_end = peer.rcv_nxt;
            let rtr = read_rtr();
            let sent = match in_pieces {
                false => {
                    bench.deliver(peer.data(&rtr));
                    bench.sent()
                }
                true => {
                    let mut sent = vec![];
                    for piece in rtr.chunks(11) {
                        bench.deliver(peer.data(piece));
                        sent.extend(bench.sent());
                    }
                    sent.split_off(sent.len() - 1)
                }
            };
            assert_eq!(kinds(&sent), ["DATA"], "pieces: {in_pieces}");
            assert_eq!((sent[0].seq, sent[0].ack), (reply_end, Some(peer.snd_nxt)));
            assert_read_response(&sent[0].payload);
            peer.saw_all(&sent);
            // The flow from the bytes after the RTR and after our Read Response (the
            // accept's write was taken back at once).
            assert_eq!(bench.hal.flow_writes.len(), 2);
            let flow = bench.hal.flows.values().next().copied().unwrap();
            assert!(!flow.rtr_expected && flow.crc);
            assert_eq!(
                (flow.snd_una, flow.snd_nxt, flow.rcv_nxt),
                (reply_end, peer.rcv_nxt, peer.snd_nxt)
            );
            let out = bench.out();
            assert_eq!(briefs(&out), ["Established(0)"]);
            assert_eq!(
                event(&out[0]).rtr,
                RtrTypes::READ,
                "the host's inbound Read Requests start at message number 2"
            );
            assert_eq!(bench.fw.state(conn), Some(State::Established));
            assert_eq!(bench.fw.counters().read_responses_sent, 1);
        }
    }

    /// The response is the firmware's to send again until the datapath sees it
    /// acknowledged, as a reply handed over unacknowledged; then its buffer goes back.
    #[test]
    fn a_lost_read_response_is_sent_again_until_acknowledged() {
        let mut bench = Bench::default();
        let (mut peer, _) = until_reply(&mut bench);
        bench.deliver(peer.data(&read_rtr()));
        let response = bench.sent();
        bench.out();
        assert_eq!(bench.fw.buffers_in_use(), 1);
        bench.advance(199);
        assert!(bench.sent().is_empty());
        bench.advance(1);
        let again = bench.sent();
        assert_eq!(kinds(&again), ["DATA"]);
        assert_eq!(
            (again[0].seq, &again[0].payload),
            (response[0].seq, &response[0].payload)
        );
        peer.saw_all(&again);
        acknowledged_on_the_datapath_goes_quiet(&mut bench, 400);
    }

    /// The accept makes sure the datapath can carry the flow, as for the other types:
    /// -ENOMEM and no event (rule 3), the peer reset after the reply.
    #[test]
    fn an_accept_the_datapath_cannot_carry_fails_enomem() {
        let mut bench = Bench::default();
        let (mut peer, request) =
            passive_until_request(&mut bench, &request_v2(RtrTypes::READ, 16, 16, b""));
        bench.hal.flow_table_full = true;
        accept(&mut bench, request.conn, b"");
        assert_eq!(
            briefs(&bench.out()),
            [format!("DONE({})", -iwnic_proto::errno::ENOMEM)]
        );
        let sent = bench.sent();
        assert_eq!(kinds(&sent), ["DATA", "RST"]);
        peer.saw_all(&sent);
        assert_eq!(bench.fw.connections(), 0);
        assert!(bench.hal.flows.is_empty());
    }

    /// A flow that fitted at the accept and does not at the RTR (its bucket filled in
    /// between): no Read Response, an RST at the byte after the reply, and ESTABLISHED
    /// then CLOSE -ECONNRESET (rule 5; rule 6's statuses).
    #[test]
    fn a_flow_that_no_longer_fits_at_the_rtr_is_reset_without_a_response() {
        let mut bench = Bench::default();
        let (mut peer, _) = until_reply(&mut bench);
        let reply_end = peer.rcv_nxt;
        bench.hal.flow_table_full = true;
        bench.deliver(peer.data(&read_rtr()));
        let sent = bench.sent();
        assert_eq!(kinds(&sent), ["RST"]);
        assert_eq!(sent[0].seq, reply_end);
        assert_eq!(
            briefs(&bench.out()),
            [
                "Established(0)".to_string(),
                format!("Close({})", -ECONNRESET)
            ]
        );
        assert_eq!(bench.fw.counters().read_responses_sent, 0);
        assert_eq!(bench.fw.connections(), 0);
        assert_eq!(bench.fw.buffers_in_use(), 0);
    }

    #[test]
    fn an_rtr_of_another_type_is_terminated_0x07() {
        let mut bench = Bench::default();
        let (mut peer, _) = until_reply(&mut bench);
        bench.deliver(peer.data(&rtr(RtrTypes::WRITE)));
        let segs = bench.sent();
        assert_eq!(kinds(&segs), ["DATA", "RST"]);
        assert_eq!(terminate_code(&segs[0].payload), 0x07);
        assert_eq!(bench.fw.counters().read_responses_sent, 0);
        assert_eq!(
            briefs(&bench.out()),
            [
                "Established(0)".to_string(),
                format!("Close({})", -ECONNRESET)
            ]
        );
        assert_eq!(bench.fw.connections(), 0);
        assert!(bench.hal.flows.is_empty());
    }
}

mod syn_received {
    use super::*;

    /// A listener and a peer's SYN taken under `config`; the SYN-ACK not yet read.
    fn syn_received_with(config: Config) -> (Bench, Peer) {
        let mut bench = Bench::with(config);
        bench.listen(PORT, 8);
        let mut peer = Peer::new(40000, PORT, 5);
        bench.deliver(peer.syn());
        (bench, peer)
    }

    /// How long after the reply goes out it is sent again, and again after that, when
    /// the handshake's ACK comes `ack_after` ms after the SYN and the peer sent its SYN
    /// again at the times in `syns_again`.
    fn reply_retransmissions(ack_after: i64, syns_again: &[i64]) -> [i64; 2] {
        let (mut bench, mut peer) = syn_received_with(config());
        peer.saw_all(&bench.sent());
        let mut now = 0;
        for &at in syns_again {
            bench.advance(at - now);
            now = at;
            // The same SYN as syn_received_with's.
            bench.deliver(Peer::new(40000, PORT, 5).syn());
            peer.saw_all(&bench.sent());
        }
        bench.advance(ack_after - now);
        peer.saw_all(&bench.sent());
        bench.deliver(peer.ack());
        bench.deliver(peer.data(&request_v2(OFFER, 16, 16, b"")));
        let conn = event(&bench.out()[0]).conn;
        accept(&mut bench, conn, b"");
        assert_eq!(kinds(&bench.sent()), ["DATA"]);
        [0, 1].map(|_| {
            let mut waited = 0;
            while bench.sent().is_empty() {
                bench.advance(1);
                waited += 1;
            }
            waited
        })
    }

    /// RFC 6298 from the handshake's one round trip R: 3R (§2.2), at least 200 ms
    /// (Linux's floor, Config::rto_min) and at most the initial 1 s, doubled on every
    /// retry.
    #[test]
    fn the_handshakes_round_trip_sets_the_retransmission_timeout() {
        for (rtt, rto) in [
            (0, 200),
            (66, 200),
            (100, 300),
            (333, 999),
            (334, 1_000),
            (999, 1_000),
        ] {
            assert_eq!(
                reply_retransmissions(rtt, &[]),
                [rto, 2 * rto],
                "R = {rtt} ms"
            );
        }
    }

    /// A SYN-ACK sent again because its timer ran out gives no sample (Karn, RFC 6298
    /// §3): the timeout stays the initial 1 s (not §5.7's 3 s: see `time_handshake`).
    /// One sent again for the peer's repeated SYN leaves the timer: R is measured from
    /// the first, longer than the truth, never shorter.
    #[test]
    fn a_retransmitted_syn_ack_gives_no_sample() {
        assert_eq!(reply_retransmissions(1_010, &[]), [1_000, 2_000]);
        assert_eq!(reply_retransmissions(200, &[100]), [600, 1_200]);
    }

    /// The first timeout, the floor and the ceiling are the configuration's: the floor
    /// kept under the ceiling, every timeout under 65.536 s.
    #[test]
    fn the_timeouts_follow_the_configuration() {
        use smoltcp::time::Duration;
        let rto = |initial, min, max| Config {
            rto_initial: Duration::from_millis(initial),
            rto_min: Duration::from_millis(min),
            rto_max: Duration::from_millis(max),
            ..config()
        };
        let waited_for_a_segment = |bench: &mut Bench| {
            let mut waited = 0;
            while bench.sent().is_empty() {
                bench.advance(1);
                waited += 1;
            }
            waited
        };
        // The SYN-ACK's timeout, then the reply's after an instant handshake.
        let timeouts = |config: Config| {
            let (mut bench, mut peer) = syn_received_with(config);
            peer.saw_all(&bench.sent());
            let syn_ack = waited_for_a_segment(&mut bench);
            let (mut bench, mut peer) = syn_received_with(config);
            peer.saw_all(&bench.sent());
            bench.deliver(peer.ack());
            bench.deliver(peer.data(&request_v2(OFFER, 16, 16, b"")));
            let conn = event(&bench.out()[0]).conn;
            accept(&mut bench, conn, b"");
            bench.sent();
            (syn_ack, waited_for_a_segment(&mut bench))
        };
        assert_eq!(timeouts(rto(50, 20, 60_000)), (50, 20));
        assert_eq!(timeouts(rto(50, 5_000, 60_000)), (50, 5_000));
        assert_eq!(timeouts(rto(5_000, 9_000, 4_000)), (4_000, 4_000));
        assert_eq!(timeouts(rto(100_000, 200, 100_000)), (65_535, 200));
    }

    /// While the host queue has no room the firmware takes no frame, and times the
    /// handshake to when it took the ACK: a 4 s stall of the host is no 4 s round trip.
    /// The sample never lengthens the timeout past the initial 1 s, so the reply, lost,
    /// goes again after it (with the stall taken as R, 12 s: never, inside the 10 s RTR
    /// timer).
    #[test]
    fn a_host_that_stalls_the_handshakes_ack_does_not_stretch_the_timeout() {
        let (mut bench, mut peer) = syn_received_with(config());
        peer.saw_all(&bench.sent());
        bench.hal.host_room = 2; // less than an input's records
        bench.hal.receive(peer.ack());
        bench.advance(4_000);
        bench.hal.host_room = 64;
        bench.poll();
        bench.deliver(peer.data(&request_v2(OFFER, 16, 16, b"")));
        let conn = event(&bench.out()[0]).conn;
        accept(&mut bench, conn, b"");
        assert_eq!(kinds(&bench.sent()), ["DATA"], "the reply, lost");
        bench.advance(999);
        assert!(bench.sent().is_empty());
        bench.advance(1);
        assert_eq!(kinds(&bench.sent()), ["DATA"]);
    }

    /// A ceiling of 0 is taken as 1 ms: no timeout of 0 ms spends every retry in the
    /// poll that armed it.
    #[test]
    fn a_zero_rto_ceiling_is_one_millisecond() {
        let (mut bench, _) = syn_received_with(Config {
            rto_max: smoltcp::time::Duration::from_millis(0),
            ..config()
        });
        assert_eq!(kinds(&bench.sent()), ["SYN-ACK"]);
        assert_eq!(bench.fw.connections(), 1);
        bench.advance(1);
        assert_eq!(kinds(&bench.sent()), ["SYN-ACK"]);
    }

    #[test]
    fn an_rst_in_the_syn_acks_window_is_challenged_and_one_beyond_it_dropped() {
        // Scaling agreed, but our SYN-ACK's own window is not scaled (RFC 7323 §2.2).
        let (mut bench, mut peer) = syn_received_with(Config {
            window_shift: 2,
            ..config()
        });
        peer.saw_all(&bench.sent());
        bench.deliver(peer.again(TcpControl::Rst, peer.snd_nxt + 1, &[]));
        assert_challenge_ack(&bench.sent(), &peer);
        bench.advance(500);
        bench.deliver(peer.again(TcpControl::Rst, peer.snd_nxt + 65535, &[]));
        assert!(bench.sent().is_empty());
        bench.deliver(peer.rst());
        assert_eq!(bench.fw.connections(), 0);
    }

    #[test]
    fn a_window_shift_above_14_is_taken_as_14() {
        // Hostile RSTs must not find a shift overflow (RFC 7323 §2.3 caps it at 14).
        let (mut bench, mut peer) = syn_received_with(Config {
            window_shift: 32,
            ..config()
        });
        let syn_ack = bench.sent();
        assert_eq!(syn_ack[0].window_scale, Some(14));
        peer.saw_all(&syn_ack);
        bench.deliver(peer.ack());
        bench.deliver(peer.again(TcpControl::Rst, peer.snd_nxt + (65535 << 14) - 1, &[]));
        assert_eq!(kinds(&bench.sent()), ["ACK"]);
        assert_eq!(bench.fw.config().window_shift, 14);
    }

    #[test]
    fn a_lost_syn_ack_is_sent_again_with_backoff_then_given_up() {
        let (mut bench, _) = syn_received_with(config());
        let first = bench.sent();
        let mut at = Vec::new();
        for _ in 0..200_000 {
            bench.advance(1);
            for s in bench.sent() {
                assert_eq!((s.kind(), s.seq), ("SYN-ACK", first[0].seq));
                at.push(bench.now_ms);
            }
            if bench.fw.connections() == 0 {
                break;
            }
        }
        // 1 s, then doubling: five retransmissions, then the half-open entry goes.
        let gaps: Vec<i64> = at.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps, [2000, 4000, 8000, 16000]);
        assert_eq!(at.len(), 5);
        assert_eq!(bench.fw.connections(), 0);
        assert!(bench.out().is_empty());
        assert_eq!(bench.fw.counters().handshake_timeouts, 1);
    }

    /// A SYN as Linux sends it (MSS, SACK-permitted, timestamps, window scale 7), with
    /// bytes on it: the SYN-ACK answers the MSS and the scaling only, so Linux turns SACK
    /// and timestamps off for the connection (RFC 2018, RFC 7323 §3.2), and acknowledges
    /// the SYN alone, as Linux does with data on a SYN without a Fast Open cookie.
    #[test]
    fn a_linux_syn_gets_mss_and_window_scale_and_its_bytes_are_not_acknowledged() {
        use iwnic_proto::net::TcpFrameRepr;
        use iwnic_proto::smoltcp_wire::{
            EthernetAddress, Ipv4Address, TcpRepr, TcpSeqNumber, TcpTimestampRepr,
        };
        let mut bench = Bench::default();
        bench.listen(PORT, 8);
        let syn = TcpFrameRepr {
            src_mac: EthernetAddress(PEER_MAC),
            dst_mac: EthernetAddress(NIC_MAC),
            src_ip: Ipv4Address::from(PEER_IP),
            dst_ip: Ipv4Address::from(NIC_IP),
            ttl: 64,
            tcp: TcpRepr {
                src_port: 40000,
                dst_port: PORT,
                control: TcpControl::Syn,
                seq_number: TcpSeqNumber(1000),
                ack_number: None,
                window_len: 64240,
                window_scale: Some(7),
                max_seg_size: Some(1460),
                sack_permitted: true,
                sack_ranges: [None; 3],
                timestamp: Some(TcpTimestampRepr::new(123_456, 0)),
                payload: b"abc",
            },
        };
        let mut frame = vec![0u8; syn.buffer_len()];
        syn.emit(&mut frame).unwrap();
        bench.deliver(frame);
        let raw = bench.hal.tx.clone();
        let sent = bench.sent();
        assert_eq!(kinds(&sent), ["SYN-ACK"]);
        assert_eq!(sent[0].ack, Some(1001), "the SYN alone acknowledged");
        assert_eq!((sent[0].mss, sent[0].window_scale), (Some(1460), Some(0)));
        let synack = TcpFrameRepr::parse(&raw[0]).unwrap().tcp;
        assert!(!synack.sack_permitted && synack.timestamp.is_none());
        assert_eq!(bench.fw.connections(), 1);
    }

    /// The SYN-ACK offers window scaling only to a SYN that did (RFC 7323 §2.2), and the
    /// flow scales both ways or neither.
    #[test]
    fn the_syn_ack_scales_the_window_only_if_the_syn_offered_to() {
        for offered in [Some(3), None] {
            let mut bench = Bench::default();
            bench.listen(PORT, 8);
            let mut peer = Peer::new(40000, PORT, 5);
            peer.window_scale = offered;
            bench.deliver(peer.syn());
            let synack = bench.sent();
            let ours = bench.fw.config().window_shift;
            assert_eq!(synack[0].mss, Some(bench.fw.config().mss));
            assert_eq!(synack[0].window_scale, offered.map(|_| ours));
            peer.saw_all(&synack);
            bench.deliver(peer.ack());
            bench.deliver(peer.data(&request_v1(b"")));
            let conn = event(&bench.out()[0]).conn;
            accept(&mut bench, conn, b"");
            let flow = bench.hal.flows.values().next().unwrap();
            let shifts = (flow.peer_window_shift, flow.local_window_shift);
            assert_eq!(shifts, offered.map_or((0, 0), |peer| (peer, ours)));
        }
    }

    /// The reply goes in segments of at most the peer's MSS, its PSH on the last, and so
    /// does its retransmission; an MSS below Linux's floor (88) is taken as 88, and an
    /// MSS option of 0 is no MSS option, 536 (Linux's `tcp_parse_options` skips it).
    #[test]
    fn the_reply_is_cut_to_the_peers_mss() {
        for (offered, mss) in [(300, 300), (20, 88), (0, 536)] {
            let mut bench = Bench::default();
            bench.listen(PORT, 8);
            let mut peer = Peer::new(40000, PORT, 5);
            peer.mss = offered;
            bench.deliver(peer.syn());
            peer.saw_all(&bench.sent());
            bench.deliver(peer.ack());
            bench.deliver(peer.data(&request_v1(b"")));
            let conn = event(&bench.out()[0]).conn;
            accept(&mut bench, conn, &[7; 400]);
            let reply = bench.sent();
            for segments in [reply.clone(), {
                bench.advance(200);
                bench.sent()
            }] {
                let sizes: Vec<usize> = segments.iter().map(|s| s.payload.len()).collect();
                let (last, full) = sizes.split_last().unwrap();
                assert!(full.iter().all(|&n| n == mss), "{sizes:?} for MSS {mss}");
                assert!(*last <= mss, "{sizes:?} for MSS {mss}");
                assert_eq!(sizes.iter().sum::<usize>(), 20 + 400);
                let seqs: Vec<u32> = segments.iter().map(|s| s.seq).collect();
                let starts = sizes.iter().scan(reply[0].seq, |seq, &n| {
                    let at = *seq;
                    *seq += n as u32;
                    Some(at)
                });
                assert_eq!(seqs, starts.collect::<Vec<_>>());
                let pushed: Vec<bool> = segments
                    .iter()
                    .map(|s| s.control == TcpControl::Psh)
                    .collect();
                assert_eq!(pushed.iter().filter(|&&p| p).count(), 1);
                assert!(pushed.last().unwrap());
            }
        }
    }

    #[test]
    fn a_repeated_syn_gets_the_syn_ack_again() {
        let mut bench = Bench::default();
        bench.listen(PORT, 8);
        let mut peer = Peer::new(40000, PORT, 5);
        let syn = peer.syn();
        bench.deliver(syn.clone());
        let first = bench.sent();
        bench.deliver(syn);
        assert_eq!(bench.sent(), first);
        assert_eq!(bench.fw.connections(), 1);
    }

    #[test]
    fn rst_drops_the_half_open_connection_quietly() {
        let (mut bench, mut peer) = syn_received_with(config());
        peer.saw_all(&bench.sent());
        bench.deliver(peer.rst());
        assert!(bench.out().is_empty());
        assert_eq!(bench.fw.connections(), 0);
    }

    #[test]
    fn syn_without_listener_is_refused_with_rst() {
        let mut bench = Bench::default();
        let mut peer = Peer::new(40000, PORT, 5);
        bench.deliver(peer.syn());
        let rst = bench.sent();
        assert_eq!(kinds(&rst), ["RST"]);
        assert_eq!(rst[0].ack, Some(6));
        assert_eq!(bench.fw.counters().segments_unmatched, 1);
        // An RST for no connection is dropped, unanswered (RFC 9293 §3.10.7.1).
        bench.deliver(peer.rst());
        assert!(bench.sent().is_empty());
        assert_eq!(bench.fw.counters().segments_unmatched, 2);
        assert_eq!(bench.fw.counters().resets_sent, 1);
    }

    /// A segment without ACK after our SYN-ACK takes nothing (RFC 9293 §3.10.7.4); the
    /// ACK that follows completes the handshake as usual.
    #[test]
    fn a_segment_without_ack_is_dropped() {
        let (mut bench, mut peer) = syn_received_with(config());
        peer.saw_all(&bench.sent());
        bench.deliver(peer.without_ack(TcpControl::Psh, b"no ack"));
        assert!(bench.sent().is_empty());
        assert!(bench.out().is_empty());
        assert_eq!(bench.fw.counters().segments_without_ack, 1);
        bench.deliver(peer.ack());
        bench.deliver(peer.data(&request_v2(OFFER, 16, 16, b"")));
        assert_eq!(briefs(&bench.out()), ["ConnectRequest(0)"]);
    }
}

mod await_request {
    use super::*;

    /// RFC 9293 §3.10.7.4 (fifth check), RFC 5961 §5.2: a request whose ACK covers
    /// bytes never sent is dropped, not raised, and draws a challenge ACK.
    #[test]
    fn a_request_acknowledging_unsent_bytes_is_dropped_with_an_ack() {
        let mut bench = Bench::default();
        let peer = handshake(&mut bench);
        let mut blind = peer.acknowledging(peer.rcv_nxt.wrapping_add(100_000));
        bench.deliver(blind.data(&request_v2(OFFER, 16, 16, b"blind")));
        assert!(bench.out().is_empty(), "no CONNECT_REQUEST");
        let sent = bench.sent();
        assert_eq!(kinds(&sent), ["ACK"]);
        assert_eq!(sent[0].ack, Some(peer.snd_nxt), "nothing taken");
        assert_eq!(bench.fw.counters().acks_unacceptable, 1);
        assert_eq!(bench.fw.connections(), 1, "the connection stays");
    }

    #[test]
    fn a_request_one_byte_at_a_time() {
        let mut bench = Bench::default();
        let mut peer = handshake(&mut bench);
        for b in request_v2(OFFER, 16, 16, b"slow") {
            bench.deliver(peer.data(&[b]));
        }
        let out = bench.out();
        assert_eq!(briefs(&out), ["ConnectRequest(0)"]);
        assert_eq!(event(&out[0]).private_data, b"slow");
    }

    #[test]
    fn a_retransmitted_request_piece_is_taken_once() {
        let mut bench = Bench::default();
        let mut peer = handshake(&mut bench);
        let request = request_v2(OFFER, 16, 16, b"");
        let seq = peer.snd_nxt;
        bench.deliver(peer.data(&request[..10]));
        bench.deliver(peer.again(
            iwnic_proto::smoltcp_wire::TcpControl::Psh,
            seq,
            &request[..10],
        ));
        bench.deliver(peer.data(&request[10..]));
        assert_eq!(briefs(&bench.out()), ["ConnectRequest(0)"]);
    }

    #[test]
    fn out_of_order_bytes_get_a_duplicate_ack() {
        let mut bench = Bench::default();
        let mut peer = handshake(&mut bench);
        let request = request_v2(OFFER, 16, 16, b"");
        let expected = peer.snd_nxt;
        peer.snd_nxt += 4;
        bench.deliver(peer.data(&request[4..]));
        let dup = bench.sent();
        assert_eq!((dup[0].kind(), dup[0].ack), ("ACK", Some(expected)));
        assert_eq!(bench.fw.counters().segments_out_of_order, 1);
        assert!(bench.out().is_empty());
    }

    /// 5 s after the handshake (siw's wait), or as configured.
    #[test]
    fn no_request_in_time_closes() {
        let configured = Config {
            mpa_request_timeout: smoltcp::time::Duration::from_millis(2_000),
            ..config()
        };
        for (config, timeout) in [(config(), 5_000), (configured, 2_000)] {
            let mut bench = Bench::with(config);
            let peer = handshake(&mut bench);
            bench.advance(timeout - 1);
            assert!(bench.sent().is_empty());
            bench.advance(1);
            let rst = bench.sent();
            assert_eq!(kinds(&rst), ["RST"]);
            assert_eq!((rst[0].seq, rst[0].ack), (peer.rcv_nxt, Some(peer.snd_nxt)));
            assert!(bench.out().is_empty());
            assert_eq!(bench.fw.connections(), 0);
            assert_eq!(bench.fw.counters().mpa_request_timeouts, 1);
        }
    }

    #[test]
    fn a_request_without_ack_is_dropped() {
        let mut bench = Bench::default();
        let mut peer = handshake(&mut bench);
        let request = request_v2(OFFER, 16, 16, b"");
        bench.deliver(peer.without_ack(TcpControl::Psh, &request));
        assert!(bench.out().is_empty());
        assert!(bench.sent().is_empty());
        assert_eq!(bench.fw.counters().segments_without_ack, 1);
        // The same bytes with ACK are the request.
        bench.deliver(peer.data(&request));
        assert_eq!(briefs(&bench.out()), ["ConnectRequest(0)"]);
    }

    #[test]
    fn a_syn_gets_a_challenge_ack_and_its_bytes_are_not_taken() {
        let mut bench = Bench::default();
        let mut peer = handshake(&mut bench);
        let request = request_v2(OFFER, 16, 16, b"");
        // In the window, with the request: a SYN on a synchronized connection anyway.
        bench.deliver(peer.again(TcpControl::Syn, peer.snd_nxt, &request));
        assert_challenge_ack(&bench.sent(), &peer);
        assert!(bench.out().is_empty());
        // Without ACK too (the fourth check comes before the fifth), once the interval
        // between two challenge ACKs has passed.
        bench.advance(500);
        bench.deliver(peer.without_ack(TcpControl::Syn, &[]));
        assert_eq!(kinds(&bench.sent()), ["ACK"]);
        assert_eq!(bench.fw.counters().syns_challenged, 2);
        assert_eq!(bench.fw.counters().segments_without_ack, 0);
        // The connection goes on.
        bench.deliver(peer.data(&request));
        assert_eq!(briefs(&bench.out()), ["ConnectRequest(0)"]);
    }

    #[test]
    fn an_rst_in_the_window_but_not_at_its_start_gets_a_challenge_ack() {
        // Scaling agreed (the peer's SYN offers it): our window is 65535 << 2.
        let mut bench = Bench::with(Config {
            window_shift: 2,
            ..config()
        });
        let peer = handshake(&mut bench);
        for offset in [1, 65535, 4 * 65535 - 1] {
            bench.advance(500);
            bench.deliver(peer.again(TcpControl::Rst, peer.snd_nxt + offset, &[]));
            assert_challenge_ack(&bench.sent(), &peer);
        }
        // Beyond the window, or before it: dropped without an answer.
        bench.deliver(peer.again(TcpControl::Rst, peer.snd_nxt + 4 * 65535, &[]));
        bench.deliver(peer.again(TcpControl::Rst, peer.snd_nxt - 1, &[]));
        assert!(bench.sent().is_empty());
        assert_eq!(bench.fw.counters().resets_challenged, 3);
        assert_eq!(bench.fw.counters().segments_out_of_order, 2);
        assert_eq!(bench.fw.connections(), 1);
        // Exactly at rcv_nxt: reset (the request was never raised, so quietly).
        bench.deliver(peer.rst());
        assert!(bench.sent().is_empty());
        assert!(bench.out().is_empty());
        assert_eq!(bench.fw.connections(), 0);
        assert_eq!(bench.fw.counters().resets_received, 1);
    }

    #[test]
    fn challenge_acks_are_limited_to_one_per_interval() {
        let mut bench = Bench::default();
        let mut peer = handshake(&mut bench);
        // A flood of spoofed SYNs and in-window RSTs: one ACK per 500 ms.
        for k in 0..10 {
            bench.deliver(peer.again(TcpControl::Syn, peer.snd_nxt + k, &[]));
            bench.deliver(peer.again(TcpControl::Rst, peer.snd_nxt + 1 + k, &[]));
        }
        assert_eq!(kinds(&bench.sent()), ["ACK"]);
        bench.advance(499);
        bench.deliver(peer.again(TcpControl::Rst, peer.snd_nxt + 1, &[]));
        assert!(bench.sent().is_empty());
        bench.advance(1);
        bench.deliver(peer.again(TcpControl::Rst, peer.snd_nxt + 1, &[]));
        assert_eq!(kinds(&bench.sent()), ["ACK"]);
        let counters = bench.fw.counters();
        assert_eq!(
            (counters.syns_challenged, counters.resets_challenged),
            (1, 1)
        );
        assert_eq!(counters.challenge_acks_limited, 20);
        // The connection goes on.
        bench.deliver(peer.data(&request_v2(OFFER, 16, 16, b"")));
        assert_eq!(briefs(&bench.out()), ["ConnectRequest(0)"]);
    }

    /// Bare segments outside the window draw one duplicate ACK per interval, sharing it
    /// with challenge ACKs (Linux's `tcp_invalid_ratelimit`); data and FIN outside it
    /// always get theirs.
    #[test]
    fn duplicate_acks_to_bare_segments_outside_the_window_are_limited() {
        let mut bench = Bench::default();
        let mut peer = handshake(&mut bench);
        let ahead = peer.at(peer.snd_nxt + 10);
        let behind = peer.at(peer.snd_nxt - 4);
        for _ in 0..5 {
            bench.deliver(ahead.again(TcpControl::None, ahead.snd_nxt, &[]));
            bench.deliver(behind.again(TcpControl::None, behind.snd_nxt, &[]));
            bench.deliver(ahead.without_ack(TcpControl::None, &[]));
        }
        assert_eq!(kinds(&bench.sent()), ["ACK"]);
        assert_eq!(bench.fw.counters().duplicate_acks_limited, 14);
        // The interval is the challenge ACKs' too.
        bench.deliver(peer.again(TcpControl::Syn, peer.snd_nxt, &[]));
        assert!(bench.sent().is_empty());
        assert_eq!(bench.fw.counters().challenge_acks_limited, 1);
        // Data and FIN are answered every time.
        for _ in 0..3 {
            bench.deliver(ahead.again(TcpControl::Psh, ahead.snd_nxt, b"ahead"));
            bench.deliver(behind.again(TcpControl::Psh, behind.snd_nxt, b"old"));
            bench.deliver(behind.again(TcpControl::Fin, behind.snd_nxt - 1, &[]));
        }
        let acks = bench.sent();
        assert_eq!(acks.len(), 9);
        assert!(acks
            .iter()
            .all(|a| a.kind() == "ACK" && a.ack == Some(peer.snd_nxt)));
        // Once the interval has passed, the next bare one is answered again.
        bench.advance(500);
        bench.deliver(ahead.again(TcpControl::None, ahead.snd_nxt, &[]));
        assert_eq!(kinds(&bench.sent()), ["ACK"]);
        assert_eq!(bench.fw.counters().duplicate_acks_limited, 14);
        bench.deliver(peer.data(&request_v2(OFFER, 16, 16, b"")));
        assert_eq!(briefs(&bench.out()), ["ConnectRequest(0)"]);
    }

    #[test]
    fn bytes_without_ack_outside_the_window_get_an_ack() {
        let mut bench = Bench::default();
        let mut peer = handshake(&mut bench);
        // Ahead of rcv_nxt, and entirely old: the first check answers both.
        let ahead = peer.at(peer.snd_nxt + 10);
        bench.deliver(ahead.without_ack(TcpControl::Psh, b"ahead"));
        let behind = peer.at(peer.snd_nxt - 4);
        bench.deliver(behind.without_ack(TcpControl::Psh, b"old"));
        let acks = bench.sent();
        assert_eq!(kinds(&acks), ["ACK", "ACK"]);
        assert!(acks.iter().all(|a| a.ack == Some(peer.snd_nxt)));
        assert_eq!(bench.fw.counters().segments_out_of_order, 2);
        assert_eq!(bench.fw.counters().segments_without_ack, 0);
        bench.deliver(peer.data(&request_v2(OFFER, 16, 16, b"")));
        assert_eq!(briefs(&bench.out()), ["ConnectRequest(0)"]);
    }

    #[test]
    fn rst_drops_quietly() {
        let mut bench = Bench::default();
        let peer = handshake(&mut bench);
        bench.deliver(peer.rst());
        assert!(bench.out().is_empty());
        assert_eq!(bench.fw.connections(), 0);
    }
}

#[test]
fn connect_request_event_describes_the_connection() {
    let mut bench = Bench::default();
    let (_, ev) = passive_until_request(&mut bench, &request_v2(OFFER, 16, 16, b"x"));
    assert_eq!(ev.kind, EventKind::ConnectRequest);
    assert_eq!(ev.local, iwnic_proto::host::Endpoint::v4(NIC_IP, PORT));
    assert_eq!(ev.remote, iwnic_proto::host::Endpoint::v4(PEER_IP, 40000));
    assert_eq!(ev.seq, 1);
}

/// The initiator's IRD bounds our ORD and its ORD our IRD: an application accepts with
/// the event's values crossed as rdma_cm passes them (ord = ird, ird = ord), and that
/// accept must be within the device's limits, which differ here.
#[test]
fn connect_request_ird_ord_are_within_the_device_limits() {
    let limits = Config {
        max_ird: 8,
        max_ord: 4,
        ..config()
    };
    for (request, offered) in [
        (request_v2(OFFER, 200, 3, b""), (4, 3)),
        (request_v2(OFFER, 2, 200, b""), (2, 8)),
        (request_v1(b""), (4, 8)),
    ] {
        let mut bench = Bench::with(limits);
        let (_, ev) = passive_until_request(&mut bench, &request);
        assert_eq!((ev.ird, ev.ord), offered);
        bench.command(Command::Accept {
            conn: ev.conn,
            ird: ev.ord,
            ord: ev.ird,
            qpn: 1,
            private_data: b"",
        });
        assert_eq!(briefs(&bench.out())[0], "DONE(0)");
    }
}
