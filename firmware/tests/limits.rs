//! Limits: table capacity (65,536 connections), a full table, half-open and listener
//! limits, listener removal with requests pending (rule 10), host-queue backpressure.

mod common;

use common::*;
use iwnic_firmware::{Firmware, State, CONNECTION_ENTRY_BYTES};
use iwnic_proto::errno::{EADDRINUSE, EINVAL};
use iwnic_proto::host::{Command, Endpoint};
use iwnic_proto::mpa::RtrTypes;

/// 65,536 connections, half open, from as many peers; one more finds the table full; all
/// of them time out and leave the table empty.
#[test]
fn capacity_65536() {
    const N: usize = 65_536;
    type Big = Firmware<N, 64>;
    // The table is built in place on a thread with room for it (debug builds construct
    // on the stack before boxing).
    let run = || {
        let config = Config {
            half_open_limit: u32::MAX,
            ..config()
        };
        let mut fw: Box<Big> = Box::new(Big::new(config));
        let bytes = std::mem::size_of::<Big>();
        println!("Firmware<65536, 64>: {bytes} bytes, {} per connection (entry {CONNECTION_ENTRY_BYTES})", bytes / N);
        let mut hal = ScriptedHal::with_host_room(64);
        let mut now = 0i64;
        let poll = |fw: &mut Big, hal: &mut ScriptedHal, now: i64| {
            fw.poll(hal, smoltcp::time::Instant::from_millis(now))
        };
        hal.commands.push_back({
            let record = iwnic_proto::host::CommandRecord {
                tag: 1,
                command: Command::Listen {
                    local: Endpoint::v4([0; 4], PORT),
                    backlog: 0,
                },
            };
            let mut buf = vec![0u8; record.buffer_len()];
            record.emit(&mut buf).unwrap();
            buf
        });
        poll(&mut fw, &mut hal, now);
        for n in 0..=N as u32 {
            let mut peer = Peer::new(1024 + (n % 60_000) as u16, PORT, n);
            let syn = peer.syn();
            // Spread peers over addresses 10.1.x.y as well as ports.
            let mut frame = syn;
            let ip = [10, 1, (n / 60_000) as u8, 0];
            frame[26..30].copy_from_slice(&ip);
            fix_checksums(&mut frame);
            hal.receive(frame);
            if hal.rx.len() == 256 {
                poll(&mut fw, &mut hal, now);
                hal.tx.clear();
            }
        }
        poll(&mut fw, &mut hal, now);
        assert_eq!(fw.connections(), N);
        assert_eq!(fw.counters().table_full, 1);
        assert_eq!(fw.counters().frames_sent, N as u32, "one SYN-ACK each");
        while fw.connections() > 0 && now < 120_000 {
            now += 100;
            poll(&mut fw, &mut hal, now);
            hal.tx.clear();
        }
        assert_eq!(fw.connections(), 0, "every half-open connection timed out");
    };
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(run)
        .unwrap()
        .join()
        .unwrap();
}

use iwnic_firmware::Config;

#[test]
fn a_full_table_drops_syns_and_refuses_connects() {
    let mut bench = Bench::default();
    bench.listen(PORT, 0);
    for port in 0..64u16 {
        bench.deliver(Peer::new(1000 + port, PORT, 1).syn());
    }
    assert_eq!(bench.fw.connections(), 64);
    bench.sent();
    bench.deliver(Peer::new(2000, PORT, 1).syn());
    assert!(bench.sent().is_empty());
    bench.command(connect_to_peer(1, 1, false, b""));
    assert_eq!(
        briefs(&bench.out()),
        [format!("DONE({})", -iwnic_proto::errno::ENOMEM)]
    );
    assert_eq!(bench.fw.counters().table_full, 2);
}

#[test]
fn the_half_open_limit_drops_syns() {
    let mut bench = Bench::with(Config {
        half_open_limit: 2,
        ..config()
    });
    bench.listen(PORT, 0);
    let mut peers: Vec<Peer> = (0..3u16).map(|p| Peer::new(1000 + p, PORT, 1)).collect();
    for peer in &mut peers {
        bench.deliver(peer.syn());
    }
    // The third is dropped, not refused: its SYN will come again.
    let syn_acks = bench.sent();
    assert_eq!(kinds(&syn_acks), ["SYN-ACK", "SYN-ACK"]);
    let answered: Vec<(u16, Option<u32>)> = syn_acks.iter().map(|s| (s.dst_port, s.ack)).collect();
    assert_eq!(answered, [(1000, Some(2)), (1001, Some(2))]);
    assert_eq!(bench.fw.connections(), 2);
    assert_eq!(bench.fw.counters().syn_dropped_half_open, 1);
    // A connection whose request is complete is half open no more: the SYN sent again
    // finds room.
    peers[0].saw(&syn_acks[0]);
    bench.deliver(peers[0].ack());
    bench.deliver(peers[0].data(&request_v2(OFFER, 1, 1, b"")));
    assert_eq!(briefs(&bench.out()), ["ConnectRequest(0)"]);
    bench.deliver(Peer::new(1002, PORT, 1).syn()); // the same SYN
    let syn_ack = bench.sent();
    assert_eq!(kinds(&syn_ack), ["SYN-ACK"]);
    assert_eq!((syn_ack[0].dst_port, syn_ack[0].ack), (1002, Some(2)));
    assert_eq!(bench.fw.counters().syn_dropped_half_open, 1);
}

#[test]
fn negotiation_buffers_run_out_gracefully() {
    // Eight buffers. Handshakes take none; a request in pieces takes one with its first
    // piece: the ninth such connection is reset. A whole request needs none.
    let mut bench = Bench::default();
    bench.listen(PORT, 0);
    let request = request_v2(OFFER, 16, 16, b"");
    let mut answers = vec![];
    for port in 0..9u16 {
        let mut peer = Peer::new(1000 + port, PORT, 1);
        bench.deliver(peer.syn());
        peer.saw_all(&bench.sent());
        bench.deliver(peer.ack());
        let held = usize::from(port).min(8);
        assert_eq!(
            bench.fw.buffers_in_use(),
            held,
            "a handshake takes no buffer"
        );
        bench.deliver(peer.data(&request[..10]));
        answers.extend(kinds(&bench.sent()));
    }
    assert_eq!(answers, [vec!["ACK"; 8], vec!["RST"]].concat());
    assert_eq!(bench.fw.counters().buffers_exhausted, 1);
    assert_eq!(bench.fw.buffers_in_use(), 8);
    let mut whole = Peer::new(2000, PORT, 1);
    bench.deliver(whole.syn());
    whole.saw_all(&bench.sent());
    bench.deliver(whole.ack());
    bench.deliver(whole.data(&request));
    let out = bench.out();
    assert_eq!(briefs(&out), ["ConnectRequest(0)"]);
    assert_eq!(bench.fw.counters().buffers_exhausted, 1);
    // Its accept needs a buffer for the reply: the request arriving the longest (the
    // first, from port 1000) gives its own, reset, and the others keep theirs.
    bench.command(accept_command(event(&out[0]).conn));
    assert_eq!(briefs(&bench.out()), ["DONE(0)"]);
    assert_eq!(
        kinds_and_ports(&bench.sent()),
        [("RST", 1000), ("DATA", 2000)]
    );
    let counters = bench.fw.counters();
    assert_eq!(
        (counters.buffers_exhausted, counters.requests_evicted),
        (2, 1)
    );
    assert_eq!(bench.fw.buffers_in_use(), 8);
    // A connect finds the pool held the same way and takes the next slowest's.
    bench.command(connect_to_peer(1, 1, false, b""));
    assert_eq!(briefs(&bench.out()), ["DONE(0)"]);
    assert_eq!(
        kinds_and_ports(&bench.sent()),
        [("RST", 1001), ("SYN", PORT)]
    );
    assert_eq!(bench.fw.counters().requests_evicted, 2);
}

#[test]
fn listen_checks() {
    let mut bench = Bench::default();
    bench.listen(PORT, 1);
    bench.command(Command::Listen {
        local: Endpoint::v4([0; 4], PORT),
        backlog: 1,
    });
    bench.command(Command::Listen {
        local: Endpoint::v4([0; 4], 0),
        backlog: 1,
    });
    bench.command(Command::Unlisten { listener: 12345 });
    assert_eq!(
        briefs(&bench.out()),
        [
            format!("DONE({})", -EADDRINUSE),
            format!("DONE({})", -EINVAL),
            format!("DONE({})", -EINVAL)
        ]
    );
    for port in 1..16 {
        bench.listen(PORT + port, 1);
    }
    bench.command(Command::Listen {
        local: Endpoint::v4([0; 4], 9),
        backlog: 1,
    });
    assert_eq!(
        briefs(&bench.out()),
        [format!("DONE({})", -iwnic_proto::errno::ENOMEM)]
    );
    assert_eq!(bench.fw.listener_count(), 16);
    // With every slot open, a SYN's search visits all sixteen: to the last one's port it
    // is taken, to a port nobody listens on it is refused.
    bench.deliver(Peer::new(1000, PORT + 15, 1).syn());
    bench.deliver(Peer::new(1001, 9, 1).syn());
    assert_eq!(kinds(&bench.sent()), ["SYN-ACK", "RST"]);
}

#[test]
fn unlisten_drops_requests_not_raised_and_keeps_raised_ones() {
    let mut bench = Bench::default();
    let (mut raised_peer, raised) =
        passive_until_request(&mut bench, &request_v2(OFFER, 16, 16, b""));
    // A second connection that has not sent its request yet.
    let mut pending = Peer::new(40001, PORT, 9);
    bench.deliver(pending.syn());
    pending.saw_all(&bench.sent());
    bench.deliver(pending.ack());
    bench.command(Command::Unlisten {
        listener: raised.listener,
    });
    assert_eq!(briefs(&bench.out()), ["DONE(0)"]);
    let rst = bench.sent();
    assert_eq!(
        (kinds(&rst).as_slice(), rst[0].dst_port),
        (&["RST"][..], 40001)
    );
    assert_eq!(bench.fw.connections(), 1);
    // New SYNs are refused; the raised request can still be accepted.
    bench.deliver(Peer::new(40002, PORT, 1).syn());
    assert_eq!(kinds(&bench.sent()), ["RST"]);
    bench.command(Command::Accept {
        conn: raised.conn,
        ird: 1,
        ord: 1,
        qpn: 1,
        private_data: b"",
    });
    raised_peer.saw_all(&bench.sent());
    bench.deliver(raised_peer.data(&rtr(RtrTypes::WRITE)));
    assert_eq!(briefs(&bench.out()), ["DONE(0)", "Established(0)"]);
}

/// Rule 10 for a connection that has only its SYN (half open, nothing raised): the NIC
/// resets it at once, at the byte after its SYN-ACK, and frees it; nothing is sent
/// again, the peer's ACK that completes the handshake finds no connection, and a new
/// listener on the port has its half-open room whole (the limit is 1 here).
#[test]
fn unlisten_resets_a_half_open_connection() {
    let mut bench = Bench::with(Config {
        half_open_limit: 1,
        ..config()
    });
    let listener = bench.listen(PORT, 8);
    let mut peer = Peer::new(40000, PORT, 7);
    bench.deliver(peer.syn());
    let syn_ack = bench.sent();
    assert_eq!(kinds(&syn_ack), ["SYN-ACK"]);
    bench.command(Command::Unlisten { listener });
    assert_eq!(briefs(&bench.out()), ["DONE(0)"]);
    let rst = bench.sent();
    assert_eq!(kinds(&rst), ["RST"]);
    assert_eq!(
        (rst[0].seq, rst[0].ack),
        (syn_ack[0].seq + 1, Some(peer.snd_nxt))
    );
    assert_eq!(bench.fw.connections(), 0);
    peer.saw_all(&syn_ack);
    bench.deliver(peer.ack());
    let refused = bench.sent();
    assert_eq!(kinds(&refused), ["RST"]);
    assert_eq!((refused[0].seq, refused[0].ack), (peer.rcv_nxt, None));
    bench.advance(70_000);
    assert!(bench.sent().is_empty() && bench.out().is_empty());
    bench.listen(PORT, 8);
    bench.deliver(Peer::new(40001, PORT, 9).syn());
    assert_eq!(kinds(&bench.sent()), ["SYN-ACK"]);
    assert_eq!(bench.fw.counters().syn_dropped_half_open, 0);
}

#[test]
fn a_full_host_queue_defers_input_and_loses_nothing() {
    let mut bench = Bench::default();
    bench.listen(PORT, 0);
    let mut peers: Vec<Peer> = (0..6u16).map(|p| Peer::new(2000 + p, PORT, 1)).collect();
    for peer in &mut peers {
        bench.deliver(peer.syn());
        let synack = bench.sent();
        peer.saw_all(&synack);
        bench.deliver(peer.ack());
    }
    // Room for four records: requests beyond two wait in the RX queue.
    bench.hal.host_room = 4;
    for peer in &mut peers {
        bench.hal.receive(peer.data(&request_v2(OFFER, 1, 1, b"")));
    }
    bench.poll();
    assert_eq!(
        bench.hal.records.len(),
        2,
        "input is taken only with room for three records"
    );
    assert_eq!(bench.hal.rx.len(), 4);
    let mut events = bench.out();
    while !bench.hal.rx.is_empty() {
        bench.poll();
        events.extend(bench.out());
    }
    assert_eq!(briefs(&events), vec!["ConnectRequest(0)"; 6]);
    let seqs: Vec<u32> = events.iter().map(|e| event(e).seq).collect();
    assert_eq!(seqs, (1..=6).collect::<Vec<_>>(), "numbered without gaps");
}

#[test]
fn the_millisecond_clock_matches_exact_division_at_any_poll_times() {
    // A connection timing out at exactly 5 s after the handshake, polled at odd
    // intervals (sub-millisecond steps, jumps, time going backwards and forwards again).
    let mut bench = Bench::default();
    handshake(&mut bench);
    let start_us = bench.now_ms * 1000;
    let poll_at = |bench: &mut Bench, us: i64| {
        bench
            .fw
            .poll(&mut bench.hal, smoltcp::time::Instant::from_micros(us));
    };
    let mut us = start_us;
    for step in [
        1i64, 999, 1, 333, 4_000_000, -2_000_000, 2_000_000, 700, 997_000,
    ] {
        us += step;
        poll_at(&mut bench, us);
        assert!(
            bench.sent().is_empty(),
            "no timeout before 5 s (at {} µs)",
            us - start_us
        );
    }
    assert_eq!(us - start_us, 4_999_034);
    poll_at(&mut bench, start_us + 4_999_999);
    assert!(bench.sent().is_empty());
    poll_at(&mut bench, start_us + 5_000_000);
    assert_eq!(
        kinds(&bench.sent()),
        ["RST"],
        "the MPA request timeout, to the millisecond"
    );
}

/// Time the host steps back (a resync of the clock `poll` is given): a timer armed
/// after the step runs its whole timeout from there, and one armed before still fires
/// when time reaches its deadline again, never before. Before, the wheel waited for time
/// to come back to where it had swept to: a timer armed after the step was late by the
/// step (a connect's SYN was not sent again for an hour).
#[test]
fn a_timer_armed_after_time_steps_back_runs_on_time() {
    for back in [5_000i64, 3_600_000] {
        let mut bench = Bench::default();
        let t0 = bench.now_ms;
        bench.command(connect_to_peer(4, 4, false, b""));
        let first = bench.sent()[0].src_port;
        bench.advance(400);
        bench.now_ms -= back;
        bench.poll();
        bench.command(connect_to_peer(4, 4, false, b""));
        let second = bench.sent()[0].src_port;
        bench.advance(999);
        assert!(bench.sent().is_empty(), "{back} ms back");
        bench.advance(1);
        let again: Vec<u16> = bench.sent().iter().map(|s| s.src_port).collect();
        assert_eq!(again, [second], "{back} ms back: the second SYN again");
        // The first connection's SYN, due at t0 + 1 s, goes again then (unless the
        // second one's timeouts have run out first: 63 s).
        bench.now_ms = t0 + 999;
        bench.poll();
        assert!(bench.sent().iter().all(|s| s.src_port != first));
        bench.now_ms = t0 + 1_000;
        bench.poll();
        let again: Vec<u16> = bench.sent().iter().map(|s| s.src_port).collect();
        assert_eq!(again, [first], "{back} ms back: the first SYN again");
    }
}

/// A gap between polls longer than half the 32-bit millisecond clock (2^31 ms, 24.9
/// days: a core halted in a debugger): every timer that fell due in it runs on the
/// first poll after, once, and timers armed after it run on time. Before, the wheel
/// took the new time for one before its cursor and ran no timer until the clock had
/// gone round to it again, up to 24.9 days later; deadlines compared on the wrapping
/// clock looked 24.9 days off.
#[test]
fn a_gap_of_25_days_between_polls_runs_what_fell_due() {
    const GAP: i64 = 25 * 86_400_000;
    let mut bench = Bench::default();
    // A passive connection waiting for its request, an active one for its SYN-ACK.
    handshake(&mut bench);
    bench.command(connect_to_peer(4, 4, false, b""));
    bench.out();
    assert_eq!(kinds(&bench.sent()), ["SYN"]);
    bench.now_ms += GAP;
    bench.poll();
    let mut sent = kinds_and_ports(&bench.sent());
    sent.sort();
    assert_eq!(
        sent,
        [("RST", 40000), ("SYN", PORT)],
        "the request timeout and the SYN's retransmission, at once"
    );
    assert_eq!(bench.fw.counters().mpa_request_timeouts, 1);
    assert_eq!(bench.fw.connections(), 1);
    // The retransmitted SYN's timeout, twice the first, from the poll after the gap.
    bench.advance(1_999);
    assert!(bench.sent().is_empty());
    bench.advance(1);
    assert_eq!(kinds(&bench.sent()), ["SYN"]);
}

/// The datapath's flow table is a hash of four-way buckets: a connection whose tuple finds
/// its bucket full cannot be carried, and the firmware has no FPDU path of its own.
mod flow_table_full {
    use super::*;
    use iwnic_proto::errno::{ECONNRESET, ENOMEM};
    use iwnic_proto::mpa::{FrameKind, V2Block};

    /// The flow written for the failed hand-off is gone again, and so is the connection.
    fn assert_flow_and_connection_gone(bench: &Bench) {
        assert_eq!(bench.hal.flow_writes.len(), 1);
        let index = bench.hal.flow_writes[0].index;
        assert_eq!(bench.hal.flow_removes, [index]);
        assert!(bench.hal.flows.is_empty() && bench.hal.unsteered.is_empty());
        assert_eq!(bench.fw.connections(), 0);
        assert_eq!(bench.fw.buffers_in_use(), 0);
        assert_eq!(bench.fw.counters().flow_table_full, 1);
    }

    /// Rule 3: an accept that fails raises no event. The reply has gone; the RST ends it.
    #[test]
    fn the_accept_fails_enomem_and_the_peer_is_reset() {
        for (request, peer_to_peer) in [
            (request_v2(OFFER, 16, 16, b""), true),
            (request_v1(b""), false),
        ] {
            let mut bench = Bench::default();
            let (mut peer, request) = passive_until_request(&mut bench, &request);
            bench.hal.flow_table_full = true;
            let tag = bench.command(Command::Accept {
                conn: request.conn,
                ird: 8,
                ord: 8,
                qpn: 3,
                private_data: b"",
            });
            let segs = bench.sent();
            assert_eq!(kinds(&segs), ["DATA", "RST"]);
            peer.saw(&segs[0]);
            assert_eq!(segs[1].seq, peer.rcv_nxt, "the RST follows the reply");
            let out = bench.out();
            assert_eq!(briefs(&out), [format!("DONE({})", -ENOMEM)]);
            assert_eq!(done(&out[0]).tag, tag);
            assert_eq!(bench.hal.flow_writes[0].rtr_expected, peer_to_peer);
            assert_flow_and_connection_gone(&bench);
        }
    }

    /// Rule 4: the connect's one CONNECT_REPLY carries the failure, with one of the
    /// rule's statuses (-ECONNRESET: the connection is reset; -ENOMEM, a provider's
    /// answer when the call itself fails, is not one of them); the hand-off's ACK
    /// (revision 1) or the RTR (peer-to-peer) has gone, the RST ends it.
    #[test]
    fn the_connect_replies_econnreset_and_the_peer_is_reset() {
        let mut bench = Bench::default();
        let (mut peer, _, _) = active_until_request(&mut bench, true, b"");
        bench.hal.flow_table_full = true;
        bench.deliver(peer.data(&reply(FrameKind::Accept, None, b"")));
        assert_eq!(kinds(&bench.sent()), ["ACK", "RST"]);
        assert_eq!(
            briefs(&bench.out()),
            [format!("ConnectReply({})", -ECONNRESET)]
        );
        assert_flow_and_connection_gone(&bench);

        let mut bench = Bench::default();
        let (mut peer, _, _) = active_until_request(&mut bench, false, b"");
        let v2 = V2Block {
            peer_to_peer: true,
            rtr: RtrTypes::WRITE,
            ird: 8,
            ord: 8,
        };
        bench.deliver(peer.data(&reply(FrameKind::Accept, Some(v2), b"")));
        let rtr = bench.sent();
        assert_eq!(kinds(&rtr), ["DATA"]);
        peer.saw_all(&rtr);
        bench.hal.flow_table_full = true;
        bench.deliver(peer.ack());
        assert_eq!(kinds(&bench.sent()), ["RST"]);
        assert_eq!(
            briefs(&bench.out()),
            [format!("ConnectReply({})", -ECONNRESET)]
        );
        assert_flow_and_connection_gone(&bench);
    }

    /// Other connections, whose tuples found room, go on.
    #[test]
    fn a_later_connection_with_room_is_carried() {
        let mut bench = Bench::default();
        let (_, refused) = passive_until_request(&mut bench, &request_v1(b""));
        bench.hal.flow_table_full = true;
        bench.command(Command::Accept {
            conn: refused.conn,
            ird: 8,
            ord: 8,
            qpn: 3,
            private_data: b"",
        });
        bench.sent();
        bench.out();
        bench.hal.flow_table_full = false;
        let mut peer = Peer::new(40001, PORT, 9_000);
        bench.deliver(peer.syn());
        peer.saw_all(&bench.sent());
        bench.deliver(peer.ack());
        bench.deliver(peer.data(&request_v1(b"")));
        let request = event(&bench.out()[0]).clone();
        bench.command(Command::Accept {
            conn: request.conn,
            ird: 8,
            ord: 8,
            qpn: 3,
            private_data: b"",
        });
        assert_eq!(kinds(&bench.sent()), ["DATA"]);
        assert_eq!(briefs(&bench.out()), ["DONE(0)", "Established(0)"]);
        assert_eq!(bench.hal.flows.len(), 1);
        assert_eq!(bench.fw.counters().flow_table_full, 1);
    }
}

/// Rule 10: the backlog bounds requests not yet delivered. A request the host reports
/// delivered (its handler returned without answering) leaves the count, once, and stays
/// the host's to answer.
mod backlog_counts_undelivered_requests {
    use super::*;
    use iwnic_proto::errno::ECONNRESET;
    use iwnic_proto::mpa::FrameKind;

    #[test]
    fn a_delivered_request_leaves_the_backlog_once() {
        let mut bench = Bench::default();
        bench.listen(PORT, 1);
        let (_, _, out) = request_from(&mut bench, 40000);
        assert_eq!(briefs(&out), ["ConnectRequest(0)"]);
        let first = event(&out[0]).conn;
        bench.command(Command::Delivered { conn: first });
        bench.command(Command::Delivered { conn: first });
        assert_eq!(briefs(&bench.out()), ["DONE(0)", "DONE(0)"]);
        // Room for one more undelivered request, not two.
        let (_, _, out) = request_from(&mut bench, 40001);
        assert_eq!(briefs(&out), ["ConnectRequest(0)"]);
        let (_, refused, out) = request_from(&mut bench, 40002);
        assert!(out.is_empty());
        assert_eq!(kinds(&refused), ["FIN"], "an MPA reject with FIN");
        assert_eq!(parse_mpa(&refused[0].payload).kind, FrameKind::Reject);
        assert_eq!(bench.fw.counters().backlog_refused, 1);
        // The delivered request is still the host's to answer (peer-to-peer: the
        // completion waits for the RTR).
        bench.command(accept_command(first));
        assert_eq!(kinds(&bench.sent()), ["DATA"]);
        assert_eq!(bench.fw.state(first), Some(State::AwaitRtr));
    }

    /// A delivered request is the application's: it survives its listener (rule 10).
    #[test]
    fn a_delivered_request_survives_its_listener() {
        let mut bench = Bench::default();
        let listener = bench.listen(PORT, 1);
        let (_, _, out) = request_from(&mut bench, 40000);
        let conn = event(&out[0]).conn;
        bench.command(Command::Delivered { conn });
        bench.command(Command::Unlisten { listener });
        assert_eq!(briefs(&bench.out()), ["DONE(0)", "DONE(0)"]);
        assert!(bench.sent().is_empty());
        bench.command(Command::Reject {
            conn,
            private_data: b"",
        });
        assert_eq!(briefs(&bench.out()), ["DONE(0)"]);
    }

    /// Only a raised request waiting for its answer can be delivered: an answered one
    /// is refused (-ECONNRESET once its handle is spent, -EINVAL while the accept waits
    /// for the RTR), as is an unknown handle (-EINVAL) and one reset underneath
    /// (-ECONNRESET).
    #[test]
    fn delivered_for_no_waiting_request_is_refused() {
        let mut bench = Bench::default();
        bench.listen(PORT, 1);
        let (_, _, out) = request_from(&mut bench, 40000);
        let rejected = event(&out[0]).conn;
        bench.command(Command::Reject {
            conn: rejected,
            private_data: b"",
        });
        bench.command(Command::Delivered { conn: rejected });
        bench.command(Command::Delivered { conn: 12345 });
        bench.sent();
        let (_, _, out) = request_from(&mut bench, 40001);
        assert_eq!(
            briefs(&out),
            [
                "DONE(0)".to_string(),
                format!("DONE({})", -ECONNRESET),
                format!("DONE({})", -EINVAL),
                "ConnectRequest(0)".to_string()
            ]
        );
        let accepted = event(&out[3]).conn;
        bench.command(accept_command(accepted));
        bench.command(Command::Delivered { conn: accepted });
        bench.sent();
        let (peer, _, out) = request_from(&mut bench, 40002);
        let dead = event(&out[2]).conn;
        bench.deliver(peer.rst());
        bench.command(Command::Delivered { conn: dead });
        assert_eq!(
            briefs(&out[..2]),
            ["DONE(0)".to_string(), format!("DONE({})", -EINVAL)],
            "the accept completes; its request, waiting for the RTR, is answered"
        );
        assert_eq!(briefs(&bench.out()), [format!("DONE({})", -ECONNRESET)]);
        assert_eq!(bench.fw.counters().backlog_refused, 0);
    }
}
