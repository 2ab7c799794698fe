//! Close and abort, per state: ESTABLISHED, FIN_WAIT_1/2, CLOSING, TIME_WAIT, LAST_ACK;
//! sequence numbers taken back from the datapath; datapath reports.

mod common;

use common::*;
use iwnic_firmware::{Config, FlowEvent, FlowEventKind, State};
use iwnic_proto::errno::{ECONNRESET, ETIMEDOUT};
use iwnic_proto::host::Command;
use iwnic_proto::mpa::RtrTypes;
use iwnic_proto::smoltcp_wire::TcpControl;
use smoltcp::time::Duration;

/// A passive v2 peer-to-peer connection in FPDU mode; the datapath then carried
/// `carried` bytes each way.
fn established(bench: &mut Bench, carried: u32) -> (Peer, u32) {
    let (mut peer, request) =
        passive_until_request(bench, &request_v2(RtrTypes::READ, 16, 16, b""));
    bench.command(Command::Accept {
        conn: request.conn,
        ird: 16,
        ord: 16,
        qpn: 1,
        private_data: b"",
    });
    peer.saw_all(&bench.sent());
    bench.arrive(peer.data(&rtr(RtrTypes::READ)));
    peer.saw_all(&bench.sent());
    assert_eq!(briefs(&bench.out()), ["DONE(0)", "Established(0)"]);
    // The datapath moves both directions on without the firmware.
    let flow = bench.hal.flows.values_mut().next().unwrap();
    flow.snd_nxt = flow.snd_nxt.wrapping_add(carried);
    flow.snd_una = flow.snd_nxt;
    flow.rcv_nxt = flow.rcv_nxt.wrapping_add(carried);
    peer.snd_nxt = peer.snd_nxt.wrapping_add(carried);
    peer.rcv_nxt = peer.rcv_nxt.wrapping_add(carried);
    (peer, request.conn)
}

/// The host disconnects an established connection (`established(bench, 5_000)`), the
/// peer acknowledges our FIN and sends its own: TIME_WAIT, CLOSE 0 raised. Returns the
/// peer, the connection's handle and our FIN's sequence number.
fn time_wait(bench: &mut Bench) -> (Peer, u32, u32) {
    let (mut peer, conn) = established(bench, 5_000);
    let our_fin = peer.rcv_nxt;
    host_closes(bench, &mut peer, conn);
    assert_eq!(
        peer.rcv_nxt,
        our_fin + 1,
        "the FIN at the datapath's numbers"
    );
    bench.deliver(peer.ack());
    assert_eq!(bench.fw.state(conn), Some(State::FinWait2));
    bench.deliver(peer.fin());
    assert_eq!(kinds(&bench.sent()), ["ACK"]);
    assert_eq!(briefs(&bench.out()), ["Close(0)"]);
    (peer, conn, our_fin)
}

/// The host disconnects gracefully; the peer sees our FIN.
fn host_closes(bench: &mut Bench, peer: &mut Peer, conn: u32) {
    bench.command(Command::Disconnect {
        conn,
        abrupt: false,
    });
    assert_eq!(briefs(&bench.out()), ["DONE(0)"]);
    let fin = bench.sent();
    assert_eq!(kinds(&fin), ["FIN"]);
    peer.saw_all(&fin);
}

mod established {
    use super::*;

    /// A FIN steered to the firmware is judged by the datapath's numbers: one
    /// acknowledging bytes the datapath never sent closes nothing.
    #[test]
    fn a_fin_acknowledging_unsent_bytes_is_dropped() {
        let mut bench = Bench::default();
        let (peer, conn) = established(&mut bench, 1_000);
        let mut blind = peer.acknowledging(peer.rcv_nxt.wrapping_add(1_000_000));
        bench.deliver(blind.fin());
        assert!(bench.out().is_empty(), "no DISCONNECT");
        assert_eq!(kinds(&bench.sent()), ["ACK"]);
        assert_eq!(bench.fw.state(conn), Some(State::Established));
        assert_eq!(bench.hal.flows.len(), 1, "the flow stays in the datapath");
        assert_eq!(bench.fw.counters().acks_unacceptable, 1);
    }

    #[test]
    fn peer_fin_raises_disconnect_then_close_after_our_fin_is_acked() {
        let mut bench = Bench::default();
        let (mut peer, conn) = established(&mut bench, 10_000);
        bench.deliver(peer.fin());
        let segs = bench.sent();
        // Our FIN at the datapath's snd_nxt, acknowledging the peer's FIN.
        assert_eq!(kinds(&segs), ["FIN"]);
        assert_eq!(
            (segs[0].seq, segs[0].ack),
            (peer.rcv_nxt, Some(peer.snd_nxt))
        );
        assert!(bench.hal.flows.is_empty(), "the flow is taken back");
        assert_eq!(briefs(&bench.out()), ["Disconnect(0)"]);
        assert_eq!(bench.fw.state(conn), Some(State::LastAck));
        peer.saw_all(&segs);
        bench.deliver(peer.ack());
        let out = bench.out();
        assert_eq!(briefs(&out), ["Close(0)"]);
        assert_eq!(event(&out[0]).conn, conn);
        assert_eq!(bench.fw.connections(), 0);
    }

    #[test]
    fn a_fin_beyond_what_the_datapath_received_waits() {
        let mut bench = Bench::default();
        let (mut peer, _) = established(&mut bench, 0);
        peer.snd_nxt += 100; // data the datapath has not seen
        bench.deliver(peer.fin());
        assert!(bench.sent().is_empty());
        assert!(bench.out().is_empty());
        assert_eq!(bench.fw.counters().segments_out_of_order, 1);
    }

    #[test]
    fn host_disconnect_closes_gracefully_through_time_wait() {
        let mut bench = Bench::default();
        let (peer, conn, _) = time_wait(&mut bench);
        // TIME_WAIT holds the entry (not the handle) and answers a repeated FIN, which
        // restarts its 2 MSL (RFC 9293 §3.10.7.4, eighth step).
        assert_eq!(bench.fw.state(conn), None);
        assert_eq!(bench.fw.connections(), 1);
        let seq = peer.snd_nxt - 1;
        bench.advance(50_000);
        bench.deliver(peer.again(TcpControl::Fin, seq, &[]));
        assert_eq!(kinds(&bench.sent()), ["ACK"]);
        bench.advance(59_999);
        assert_eq!(bench.fw.connections(), 1, "60 s from the repeated FIN");
        bench.advance(1);
        assert_eq!(bench.fw.connections(), 0);
        assert!(bench.out().is_empty(), "CLOSE exactly once");
    }

    #[test]
    fn simultaneous_close_goes_through_closing() {
        let mut bench = Bench::default();
        let (mut peer, conn) = established(&mut bench, 1_000);
        bench.command(Command::Disconnect {
            conn,
            abrupt: false,
        });
        assert_eq!(briefs(&bench.out()), ["DONE(0)"]);
        let our_fin = bench.sent();
        assert_eq!(kinds(&our_fin), ["FIN"]);
        assert_eq!(
            (our_fin[0].seq, our_fin[0].ack),
            (peer.rcv_nxt, Some(peer.snd_nxt)),
            "at the datapath's numbers"
        );
        // The peer's FIN crosses ours: it does not acknowledge it.
        bench.deliver(peer.fin());
        assert_eq!(bench.fw.state(conn), Some(State::Closing));
        let ack = bench.sent();
        assert_eq!(kinds(&ack), ["ACK"]);
        assert_eq!(
            (ack[0].seq, ack[0].ack),
            (our_fin[0].seq + 1, Some(peer.snd_nxt)),
            "after our FIN, acknowledging theirs"
        );
        assert!(bench.out().is_empty(), "CLOSE waits for our FIN's ACK");
        peer.saw_all(&our_fin);
        bench.deliver(peer.ack());
        assert_eq!(briefs(&bench.out()), ["Close(0)"]);
        assert_eq!(bench.fw.connections(), 1, "TIME_WAIT");
        bench.advance(60_000);
        assert_eq!(bench.fw.connections(), 0);
        assert!(bench.out().is_empty() && bench.sent().is_empty());
    }

    #[test]
    fn abrupt_disconnect_resets() {
        let mut bench = Bench::default();
        let (peer, conn) = established(&mut bench, 777);
        bench.command(Command::Disconnect { conn, abrupt: true });
        let rst = bench.sent();
        assert_eq!((rst[0].kind(), rst[0].seq), ("RST", peer.rcv_nxt));
        assert_eq!(
            briefs(&bench.out()),
            ["DONE(0)".to_string(), format!("Close({})", -ECONNRESET)]
        );
        assert_eq!(bench.fw.connections(), 0);
    }

    #[test]
    fn peer_rst_in_the_window_raises_close() {
        let mut bench = Bench::default();
        let (peer, _) = established(&mut bench, 3);
        let mut stale = peer.clone();
        stale.snd_nxt = stale.snd_nxt.wrapping_sub(100_000);
        bench.deliver(stale.rst());
        assert!(
            bench.out().is_empty(),
            "an RST outside the window is ignored"
        );
        bench.deliver(peer.rst());
        assert_eq!(briefs(&bench.out()), [format!("Close({})", -ECONNRESET)]);
    }

    #[test]
    fn an_rst_in_the_window_but_not_at_rcv_nxt_is_challenged_at_the_datapaths_numbers() {
        let mut bench = Bench::default();
        let (peer, conn) = established(&mut bench, 3);
        let ahead = peer.at(peer.snd_nxt.wrapping_add(10));
        bench.deliver(ahead.rst());
        assert!(bench.out().is_empty());
        // At the datapath's numbers, which moved past the firmware's on the 3 bytes.
        assert_challenge_ack(&bench.sent(), &peer);
        assert_eq!(bench.fw.counters().resets_challenged, 1);
        assert_eq!(bench.fw.state(conn), Some(State::Established));
        bench.deliver(peer.rst());
        assert_eq!(briefs(&bench.out()), [format!("Close({})", -ECONNRESET)]);
    }

    #[test]
    fn a_syn_or_a_segment_without_ack_in_fpdu_mode_takes_nothing() {
        // The datapath steers both here, whole (hal.rs).
        let mut bench = Bench::default();
        let (peer, conn) = established(&mut bench, 3);
        bench.deliver(peer.again(TcpControl::Syn, peer.snd_nxt, b"data"));
        assert_challenge_ack(&bench.sent(), &peer);
        bench.deliver(peer.without_ack(TcpControl::Fin, &[]));
        assert!(bench.sent().is_empty());
        assert!(bench.out().is_empty());
        assert_eq!(bench.fw.state(conn), Some(State::Established));
        let counters = bench.fw.counters();
        assert_eq!(
            (counters.syns_challenged, counters.segments_without_ack),
            (1, 1)
        );
    }

    /// The interval between challenge ACKs is measured on the 32-bit millisecond clock:
    /// on a connection that sent none for 2^32 ms (49.7 days), the same 500 ms after
    /// its stamp come round again, and without the stamps' ageing a SYN then got no
    /// challenge ACK, counted as limited, though none went for 49.7 days.
    #[test]
    fn a_syn_49_7_days_after_the_last_challenge_is_challenged() {
        let mut bench = Bench::default();
        let (peer, _) = established(&mut bench, 3);
        // The connection's stamp is its start less the interval: 500 ms. Steps under
        // 2^31 ms, as a clock that keeps being polled moves.
        let target = 1_000 - 500 + (1i64 << 32) + 100;
        while bench.now_ms < target {
            bench.now_ms = (bench.now_ms + 1_000_000_000).min(target);
            bench.poll();
        }
        bench.deliver(peer.again(TcpControl::Syn, peer.snd_nxt, b""));
        assert_challenge_ack(&bench.sent(), &peer);
        assert_eq!(bench.fw.counters().challenge_acks_limited, 0);
    }

    #[test]
    fn in_fpdu_mode_the_window_is_the_datapaths() {
        // Our own window is small; the datapath's ACKs advertise 65535.
        let mut bench = Bench::with(Config {
            window: 1024,
            ..config()
        });
        let (peer, conn) = established(&mut bench, 3);
        let ahead = peer.at(peer.snd_nxt.wrapping_add(5_000));
        bench.deliver(ahead.rst());
        let challenge = bench.sent();
        assert_eq!(kinds(&challenge), ["ACK"]);
        assert_eq!(challenge[0].window, u16::MAX, "the datapath's window");
        assert_eq!(bench.fw.state(conn), Some(State::Established));
    }

    /// A datapath that lost the flow (`read_flow` finds none): the connection can carry
    /// nothing more. The first frame of it that comes ends it: an RST from the frame's
    /// numbers, as for no connection, and CLOSE -ECONNRESET once. (Before, the FIN went
    /// unanswered, the RST was judged by numbers from before the hand-off and ignored,
    /// and the connection stayed ESTABLISHED.)
    #[test]
    fn a_frame_of_a_flow_the_datapath_lost_ends_the_connection() {
        for fin in [true, false] {
            let mut bench = Bench::default();
            let (mut peer, conn) = established(&mut bench, 100_000);
            bench.hal.flows.clear();
            let frame = if fin { peer.fin() } else { peer.rst() };
            bench.deliver(frame);
            let sent = bench.sent();
            if fin {
                assert_eq!(kinds(&sent), ["RST"]);
                assert_eq!(sent[0].seq, peer.rcv_nxt, "from the FIN's ACK");
            } else {
                assert!(sent.is_empty(), "an RST is not answered");
            }
            assert_eq!(briefs(&bench.out()), [format!("Close({})", -ECONNRESET)]);
            assert_eq!(bench.fw.state(conn), None);
            assert_eq!(bench.fw.connections(), 0);
            assert_eq!(bench.fw.counters().flows_lost, 1);
            bench.advance(600_000);
            assert!(bench.out().is_empty() && bench.sent().is_empty());
        }
    }

    #[test]
    fn a_crc_error_in_the_datapath_is_terminate_rst_close() {
        for kind in [FlowEventKind::CrcError, FlowEventKind::LengthError] {
            let mut bench = Bench::default();
            let (peer, _) = established(&mut bench, 64);
            let index = *bench.hal.flows.keys().next().unwrap();
            bench.hal.flow_events.push_back(FlowEvent { index, kind });
            bench.poll();
            let segs = bench.sent();
            assert_eq!(kinds(&segs), ["DATA", "RST"]);
            assert_eq!(segs[0].seq, peer.rcv_nxt);
            assert_eq!(terminate_code(&segs[0].payload), 0x02);
            assert_eq!(segs[1].seq, segs[0].seq + segs[0].len());
            assert_eq!(briefs(&bench.out()), [format!("Close({})", -ECONNRESET)]);
            assert!(bench.hal.flows.is_empty());
        }
    }
}

mod closing {
    use super::*;

    /// RFC 1122 §4.2.2.13, RFC 6191: a new SYN above the old connection's numbers opens
    /// a new connection from the listener at once, if the ISN clock has moved past every
    /// number the old one used; else (here the 5,000 bytes the datapath carried are more
    /// than the clock's 4 µs ticks since), or for a SYN at or below those numbers, it is
    /// challenged and TIME_WAIT stays.
    #[test]
    fn a_new_syn_in_time_wait_opens_a_new_connection() {
        let mut bench = Bench::default();
        let (peer, _, our_fin) = time_wait(&mut bench);
        let mut again = Peer::new(peer.port, PORT, peer.snd_nxt.wrapping_add(1_000_000));
        bench.deliver(again.syn());
        assert_challenge_ack(&bench.sent(), &peer);
        // A second later the clock has moved 250,000 ticks on.
        bench.advance(1_000);
        let mut old = Peer::new(peer.port, PORT, peer.snd_nxt.wrapping_sub(1));
        bench.deliver(old.syn());
        assert_challenge_ack(&bench.sent(), &peer);
        assert_eq!(bench.fw.counters().time_wait_reopened, 0);
        let mut again = Peer::new(peer.port, PORT, peer.snd_nxt.wrapping_add(1_000_000));
        bench.deliver(again.syn());
        let syn_ack = bench.sent();
        assert_eq!(kinds(&syn_ack), ["SYN-ACK"]);
        assert_eq!(syn_ack[0].ack, Some(again.snd_nxt));
        assert!(
            syn_ack[0].seq.wrapping_sub(our_fin) as i32 > 0,
            "the new ISS lies past the old connection's numbers"
        );
        assert_eq!(bench.fw.counters().time_wait_reopened, 1);
        assert_eq!(bench.fw.connections(), 1, "TIME_WAIT gave its entry up");
        again.saw_all(&syn_ack);
        bench.deliver(again.ack());
        bench.deliver(again.data(&request_v2(RtrTypes::READ, 16, 16, b"")));
        assert_eq!(briefs(&bench.out()), ["ConnectRequest(0)"]);
    }

    #[test]
    fn a_fin_acknowledging_unsent_bytes_does_not_end_fin_wait_2() {
        let mut bench = Bench::default();
        let (mut peer, conn) = established(&mut bench, 0);
        host_closes(&mut bench, &mut peer, conn);
        bench.deliver(peer.ack());
        assert_eq!(bench.fw.state(conn), Some(State::FinWait2));
        let mut blind = peer.acknowledging(peer.rcv_nxt.wrapping_add(1_000_000));
        bench.deliver(blind.fin());
        assert!(bench.out().is_empty(), "no CLOSE");
        assert_eq!(bench.fw.state(conn), Some(State::FinWait2));
        assert_eq!(bench.fw.counters().acks_unacceptable, 1);
    }

    #[test]
    fn a_lost_fin_is_sent_again_then_given_up() {
        let mut bench = Bench::default();
        let (_, conn) = established(&mut bench, 0);
        bench.command(Command::Disconnect {
            conn,
            abrupt: false,
        });
        bench.out();
        let fin = bench.sent();
        let mut fins = 0;
        let mut given_up_at = None;
        for second in 1..=600 {
            bench.advance(1_000);
            for s in bench.sent() {
                if s.kind() == "FIN" {
                    assert_eq!(s.seq, fin[0].seq);
                    fins += 1;
                }
            }
            let out = bench.out();
            if !out.is_empty() {
                assert_eq!(briefs(&out), [format!("Close({})", -ETIMEDOUT)]);
                given_up_at = Some(second * 1_000);
            }
        }
        assert_eq!(fins, 8, "data_retries");
        // From the handshake's 200 ms (its floor): 0.2 × (2^9 − 1) s. Config::data_timeout
        // bounds it from rto_initial (243 s with the defaults).
        assert_eq!(
            given_up_at,
            Some(103_000),
            "102.2 s, seen at the next whole second"
        );
        assert_eq!(bench.fw.config().data_timeout().total_millis(), 243_000);
        assert_eq!(bench.fw.connections(), 0);
    }

    /// The datapath sent 100 bytes the peer has not acknowledged when the flow is taken
    /// back: our FIN follows them, and goes again at its own sequence number, not at
    /// `snd_una` (where the peer would take it as ending the stream early), in LAST_ACK
    /// (the peer closed) and FIN_WAIT_1 (the host did).
    #[test]
    fn a_fin_after_unacknowledged_datapath_bytes_is_sent_again_at_its_own_number() {
        for peer_closes in [true, false] {
            let mut bench = Bench::default();
            let (mut peer, conn) = established(&mut bench, 0);
            let flow = bench.hal.flows.values_mut().next().unwrap();
            flow.snd_nxt = flow.snd_nxt.wrapping_add(100);
            let fin_seq = flow.snd_nxt;
            if peer_closes {
                bench.deliver(peer.fin());
            } else {
                bench.command(Command::Disconnect {
                    conn,
                    abrupt: false,
                });
            }
            bench.out();
            let fin = bench.sent();
            assert_eq!((kinds(&fin), fin[0].seq), (vec!["FIN"], fin_seq));
            bench.advance(200);
            let again = bench.sent();
            assert_eq!(kinds(&again), ["FIN"], "peer closes: {peer_closes}");
            assert_eq!((again[0].seq, again[0].ack), (fin_seq, fin[0].ack));
            assert!(again[0].payload.is_empty());
        }
    }

    /// 60 s after the peer acknowledged our FIN, or as configured, the entry goes
    /// without a segment.
    #[test]
    fn fin_wait_2_times_out() {
        let configured = Config {
            fin_wait_2_timeout: Duration::from_millis(4_000),
            ..config()
        };
        for (config, timeout) in [(config(), 60_000), (configured, 4_000)] {
            let mut bench = Bench::with(config);
            let (mut peer, conn) = established(&mut bench, 0);
            host_closes(&mut bench, &mut peer, conn);
            bench.deliver(peer.ack());
            bench.advance(timeout - 1);
            assert!(bench.out().is_empty() && bench.sent().is_empty());
            assert_eq!(bench.fw.state(conn), Some(State::FinWait2));
            bench.advance(1);
            assert_eq!(briefs(&bench.out()), [format!("Close({})", -ETIMEDOUT)]);
            assert!(bench.sent().is_empty());
            assert_eq!(bench.fw.connections(), 0);
            // The peer's FIN, late, finds no connection.
            bench.deliver(peer.fin());
            assert_eq!(kinds(&bench.sent()), ["RST"]);
        }
    }

    /// TIME_WAIT holds the entry 2 MSL (60 s), or as configured, without a word.
    #[test]
    fn time_wait_lasts_2_msl() {
        let configured = Config {
            time_wait: Duration::from_millis(7_000),
            ..config()
        };
        for (config, two_msl) in [(config(), 60_000), (configured, 7_000)] {
            let mut bench = Bench::with(config);
            time_wait(&mut bench);
            bench.advance(two_msl - 1);
            assert_eq!(bench.fw.connections(), 1);
            bench.advance(1);
            assert_eq!(bench.fw.connections(), 0);
            assert!(bench.out().is_empty() && bench.sent().is_empty());
        }
    }

    #[test]
    fn rst_in_last_ack_raises_close_reset() {
        let mut bench = Bench::default();
        let (mut peer, _) = established(&mut bench, 0);
        bench.deliver(peer.fin());
        bench.out();
        peer.saw_all(&bench.sent());
        bench.deliver(peer.rst());
        assert_eq!(briefs(&bench.out()), [format!("Close({})", -ECONNRESET)]);
        assert_eq!(bench.fw.connections(), 0);
    }

    #[test]
    fn rst_in_each_closing_state() {
        // FIN_WAIT_1, FIN_WAIT_2, CLOSING: the host hears CLOSE -ECONNRESET. TIME_WAIT: it
        // already heard CLOSE 0; the entry just goes.
        for state in [
            State::FinWait1,
            State::FinWait2,
            State::Closing,
            State::TimeWait,
        ] {
            let mut bench = Bench::default();
            let (mut peer, conn) = established(&mut bench, 0);
            bench.command(Command::Disconnect {
                conn,
                abrupt: false,
            });
            bench.out();
            let our_fin = bench.sent();
            match state {
                State::FinWait1 => {}
                State::FinWait2 => {
                    peer.saw_all(&our_fin);
                    bench.deliver(peer.ack());
                }
                State::Closing => bench.deliver(peer.fin()),
                _ => {
                    peer.saw_all(&our_fin);
                    bench.deliver(peer.ack());
                    bench.deliver(peer.fin());
                }
            }
            let before = bench.out();
            assert_eq!(bench.fw.state(conn).or(Some(State::TimeWait)), Some(state));
            bench.sent();
            bench.deliver(peer.rst());
            let after = briefs(&bench.out());
            if state == State::TimeWait {
                assert_eq!(briefs(&before), ["Close(0)"]);
                assert!(after.is_empty(), "CLOSE was already the last event");
            } else {
                assert_eq!(after, [format!("Close({})", -ECONNRESET)], "{state:?}");
            }
            assert!(bench.sent().is_empty(), "{state:?}: no RST answers a RST");
            assert_eq!(bench.fw.connections(), 0, "{state:?}");
        }
    }

    #[test]
    fn data_after_our_fin_is_acknowledged_and_dropped() {
        let mut bench = Bench::default();
        let (mut peer, conn) = established(&mut bench, 0);
        host_closes(&mut bench, &mut peer, conn);
        bench.deliver(peer.data(b"late FPDU"));
        let ack = bench.sent();
        assert_eq!((ack[0].kind(), ack[0].ack), ("ACK", Some(peer.snd_nxt)));
        assert!(bench.out().is_empty());
        assert_eq!(bench.fw.counters().data_after_fin_dropped, 1);
    }

    /// After the peer's FIN nothing can follow: text "after" it (a broken peer, or a
    /// blind segment in the window) is ignored and unacknowledged in LAST_ACK, CLOSING
    /// and TIME_WAIT (RFC 9293 §3.10.7.4, seventh step), so the peer's RST at FIN + 1
    /// still resets LAST_ACK. (Counting it moved our ACKs past the peer's FIN, the RST
    /// fell behind rcv_nxt, and LAST_ACK ran out its retries: CLOSE -ETIMEDOUT.)
    #[test]
    fn text_after_the_peers_fin_is_ignored() {
        // LAST_ACK: the peer closed first.
        let mut bench = Bench::default();
        let (mut peer, conn) = established(&mut bench, 1_000);
        bench.deliver(peer.fin());
        assert_eq!(kinds(&bench.sent()), ["FIN"]);
        assert_eq!(briefs(&bench.out()), ["Disconnect(0)"]);
        assert_eq!(bench.fw.state(conn), Some(State::LastAck));
        let after_fin = peer.snd_nxt;
        bench.deliver(peer.data(b"after FIN"));
        assert!(bench.sent().is_empty());
        bench.deliver(peer.at(after_fin).rst());
        assert_eq!(briefs(&bench.out()), [format!("Close({})", -ECONNRESET)]);
        assert_eq!(bench.fw.connections(), 0);
        // CLOSING (the FINs crossed) and TIME_WAIT (ours was acknowledged first).
        for (ours_acknowledged, state) in [(false, Some(State::Closing)), (true, None)] {
            let mut bench = Bench::default();
            let (mut peer, conn) = established(&mut bench, 1_000);
            bench.command(Command::Disconnect {
                conn,
                abrupt: false,
            });
            bench.out();
            let our_fin = bench.sent();
            if ours_acknowledged {
                peer.saw_all(&our_fin);
            }
            bench.deliver(peer.fin());
            bench.sent();
            assert_eq!(bench.fw.state(conn), state);
            let after_fin = peer.snd_nxt;
            bench.deliver(peer.data(b"after FIN"));
            assert!(bench.sent().is_empty(), "in {state:?}");
            bench.deliver(peer.again(TcpControl::Fin, after_fin - 1, &[]));
            let ack = bench.sent();
            assert_eq!(kinds(&ack), ["ACK"], "a repeated FIN in {state:?}");
            assert_eq!(ack[0].ack, Some(after_fin));
            assert_eq!(bench.fw.counters().data_after_fin_dropped, 1);
        }
    }
}

mod release {
    use super::*;

    #[test]
    fn release_in_every_state_silences_the_connection() {
        // AWAIT_ACCEPT, AWAIT_RTR, ESTABLISHED, FIN_WAIT_1, LAST_ACK.
        for stage in 0..5 {
            let mut bench = Bench::default();
            let (mut peer, request) =
                passive_until_request(&mut bench, &request_v2(RtrTypes::READ, 16, 16, b""));
            let conn = request.conn;
            if stage >= 1 {
                bench.command(Command::Accept {
                    conn,
                    ird: 1,
                    ord: 1,
                    qpn: 1,
                    private_data: b"",
                });
                peer.saw_all(&bench.sent());
                assert_eq!(briefs(&bench.out()), ["DONE(0)"], "the accept completes");
            }
            if stage >= 2 {
                bench.deliver(peer.data(&rtr(RtrTypes::READ)));
                peer.saw_all(&bench.sent());
            }
            if stage == 3 {
                bench.command(Command::Disconnect {
                    conn,
                    abrupt: false,
                });
                peer.saw_all(&bench.sent());
            }
            if stage == 4 {
                bench.deliver(peer.fin());
                peer.saw_all(&bench.sent());
            }
            bench.out();
            let tag = bench.command(Command::Release { conn });
            let out = bench.out();
            assert_eq!(briefs(&out), ["DONE(0)"], "stage {stage}");
            assert_eq!(done(&out[0]).tag, tag);
            bench.deliver(peer.fin());
            bench.deliver(peer.ack());
            bench.advance(200_000);
            assert!(
                bench.out().is_empty(),
                "stage {stage}: nothing after release"
            );
            assert_eq!(bench.fw.connections(), 0, "stage {stage}");
            assert_eq!(bench.fw.buffers_in_use(), 0, "stage {stage}");
            assert!(bench.hal.flows.is_empty(), "stage {stage}");
        }
    }

    #[test]
    fn commands_on_a_released_handle() {
        let mut bench = Bench::default();
        let (_, conn) = established(&mut bench, 0);
        bench.command(Command::Release { conn });
        bench.out();
        bench.command(Command::Disconnect {
            conn,
            abrupt: false,
        });
        bench.command(Command::Accept {
            conn,
            ird: 1,
            ord: 1,
            qpn: 1,
            private_data: b"",
        });
        bench.command(Command::Release { conn });
        bench.command(Command::Release { conn: 0 });
        assert_eq!(
            briefs(&bench.out()),
            [
                "DONE(0)".to_string(),
                format!("DONE({})", -ECONNRESET),
                "DONE(0)".into(),
                format!("DONE({})", -iwnic_proto::errno::EINVAL)
            ]
        );
    }
}
