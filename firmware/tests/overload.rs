//! Overload and resource exhaustion: floods from the wire and host commands that find the
//! firmware's resources taken, each met with the contract's reaction.

mod common;

use common::*;
use iwnic_proto::errno::ECONNREFUSED;
use iwnic_proto::host::Command;
use iwnic_proto::mpa::FrameKind;

/// A flood of copies of one peer's SYN to its half-open connection: Linux answers a
/// repeated SYN with its SYN-ACK at most once per `tcp_invalid_ratelimit`
/// (`tcp_check_req`), as the firmware answers other invalid segments once per
/// `Config::invalid_ack_interval`, so spoofed SYNs cannot make it send a segment each.
/// Before, every copy drew a SYN-ACK. The peer's own retransmissions, a second or more
/// apart, are answered each time, and the handshake completes.
#[test]
fn repeated_syns_to_a_half_open_connection_draw_one_syn_ack_per_interval() {
    let mut bench = Bench::default();
    bench.listen(PORT, 0);
    let mut peer = Peer::new(40000, PORT, 1);
    let syn = peer.syn();
    bench.deliver(syn.clone());
    let syn_ack = bench.sent();
    assert_eq!(kinds(&syn_ack), ["SYN-ACK"]);
    for _ in 0..100 {
        bench.deliver(syn.clone());
    }
    let again = bench.sent();
    assert_eq!(kinds(&again), ["SYN-ACK"], "one answer within the interval");
    assert_eq!(again[0].seq, syn_ack[0].seq);
    assert_eq!(bench.fw.counters().syn_acks_limited, 99);
    bench.advance(499);
    bench.deliver(syn.clone());
    assert!(bench.sent().is_empty());
    bench.advance(1);
    bench.deliver(syn.clone());
    assert_eq!(kinds(&bench.sent()), ["SYN-ACK"]);
    assert_eq!(bench.fw.counters().syn_acks_limited, 100);
    peer.saw_all(&syn_ack);
    bench.deliver(peer.ack());
    bench.deliver(peer.data(&request_v2(OFFER, 16, 16, b"")));
    assert_eq!(briefs(&bench.out()), ["ConnectRequest(0)"]);
}

/// Rule 10 and the reject's row of the contract: the peer of a rejected request gets an
/// MPA reply with R=1 carrying the host's private data, then the close. A host's reject
/// that finds every negotiation buffer held by requests arriving in pieces takes one as
/// its accept or connect would: the request arriving the longest is reset (counted) and
/// gives its buffer. Before, the reject completed 0 and the peer got only an RST.
#[test]
fn a_reject_with_every_buffer_held_evicts_the_slowest_request() {
    let mut bench = Bench::default();
    bench.listen(PORT, 0);
    let (mut rejected, _, out) = request_from(&mut bench, 2000);
    let conn = event(&out[0]).conn;
    let request = request_v2(OFFER, 16, 16, b"");
    for port in 0..8u16 {
        let mut peer = Peer::new(1000 + port, PORT, 1);
        bench.deliver(peer.syn());
        peer.saw_all(&bench.sent());
        bench.deliver(peer.ack());
        bench.deliver(peer.data(&request[..10]));
        assert_eq!(kinds(&bench.sent()), ["ACK"]);
    }
    assert_eq!(bench.fw.buffers_in_use(), 8);
    bench.command(Command::Reject {
        conn,
        private_data: b"busy",
    });
    assert_eq!(briefs(&bench.out()), ["DONE(0)"]);
    let sent = bench.sent();
    assert_eq!(kinds_and_ports(&sent), [("RST", 1000), ("FIN", 2000)]);
    let reject = parse_mpa(&sent[1].payload);
    assert_eq!(
        (reject.kind, reject.private_data),
        (FrameKind::Reject, &b"busy"[..])
    );
    assert_eq!(bench.fw.counters().requests_evicted, 1);
    // The reject is sent again until acknowledged, and the close completes.
    let mut again = bench.sent();
    while again.is_empty() {
        bench.advance(1);
        again = bench.sent();
    }
    assert_eq!(kinds_and_ports(&again), [("FIN", 2000)]);
    rejected.saw_all(&again);
    bench.deliver(rejected.ack());
    bench.deliver(rejected.fin());
    assert_eq!(kinds(&bench.sent()), ["ACK"]);
    assert!(bench.out().is_empty());
    assert_eq!(bench.fw.buffers_in_use(), 7);
}

/// A connect the peer rejects: the CONNECT_REPLY -ECONNREFUSED carries the reject's
/// private data, and from then on the negotiation buffer holds nothing the connection
/// needs (its request acknowledged, the FIN sent again on its own). Before, it kept the
/// buffer until the peer acknowledged the FIN, which a peer that does not answer put off
/// for the FIN's whole retransmission span: with one buffer, every other connect failed
/// with -ENOBUFS meanwhile.
#[test]
fn a_rejected_connect_does_not_hold_its_buffer_through_the_close() {
    let mut bench: Bench<64, 1> = Bench::sized(config());
    bench.command(connect_to_peer(16, 16, false, b""));
    assert_eq!(briefs(&bench.out()), ["DONE(0)"]);
    let syn = bench.sent();
    let mut peer = Peer::new(PORT, syn[0].src_port, 90_000);
    peer.saw_all(&syn);
    bench.deliver(peer.syn());
    peer.saw_all(&bench.sent());
    bench.deliver(peer.data(&reply(FrameKind::Reject, None, b"no")));
    let out = bench.out();
    assert_eq!(briefs(&out), [format!("ConnectReply({})", -ECONNREFUSED)]);
    assert_eq!(event(&out[0]).private_data, b"no");
    let fin = bench.sent();
    assert_eq!(kinds(&fin), ["FIN"]);
    assert_eq!(bench.fw.buffers_in_use(), 0);
    bench.command(connect_to_peer(16, 16, false, b""));
    assert_eq!(briefs(&bench.out()), ["DONE(0)"]);
    assert_eq!(kinds_and_ports(&bench.sent()), [("SYN", PORT)]);
    // The first connection's FIN goes again, alone, until the peer acknowledges it.
    let mut again = bench.sent();
    while again.is_empty() {
        bench.advance(1);
        again = bench.sent();
    }
    let again: Vec<_> = again
        .into_iter()
        .filter(|s| s.src_port == fin[0].src_port)
        .collect();
    assert_eq!(kinds(&again), ["FIN"]);
    assert_eq!((again[0].seq, again[0].payload.len()), (fin[0].seq, 0));
    peer.saw_all(&again);
    bench.deliver(peer.ack());
    bench.deliver(peer.fin());
    assert!(bench.out().is_empty());
}

/// Peers that send whole requests past the backlog and then fall silent: each refusal
/// (the reply with R=1 and FIN) holds a negotiation buffer until the peer acknowledges
/// it, for the FIN's whole retransmission span. Eight of them held the pool, and the
/// host's accept of a request it was given failed with -ENOBUFS and reset that peer: the
/// outcome the eviction rule prevents for requests arriving in pieces, reached another
/// way. The rule now takes a closing connection's buffer when no request is arriving in
/// pieces: one refused peer is reset (counted), and the accept is served.
#[test]
fn an_accept_is_served_while_refused_silent_peers_hold_every_buffer() {
    let mut bench = Bench::default();
    bench.listen(PORT, 1);
    let (_, _, out) = request_from(&mut bench, 2000);
    let conn = event(&out[0]).conn;
    for port in 0..8u16 {
        let (_, refused, out) = request_from(&mut bench, 1000 + port);
        assert!(out.is_empty());
        assert_eq!(kinds(&refused), ["FIN"], "an MPA reject with FIN");
    }
    assert_eq!(bench.fw.buffers_in_use(), 8);
    assert_eq!(bench.fw.counters().backlog_refused, 8);
    bench.command(accept_command(conn));
    assert_eq!(briefs(&bench.out()), ["DONE(0)"]);
    let sent = kinds_and_ports(&bench.sent());
    assert!(sent.contains(&("DATA", 2000)), "the reply: {sent:?}");
    assert_eq!(
        sent.iter().filter(|(kind, _)| *kind == "RST").count(),
        1,
        "one refused peer reset for its buffer: {sent:?}"
    );
    let counters = bench.fw.counters();
    assert_eq!(
        (counters.closings_evicted, counters.requests_evicted),
        (1, 0)
    );
    assert_eq!(bench.fw.buffers_in_use(), 8);
}
