//! Overload and resource exhaustion: floods from the wire and host commands that find the
//! firmware's resources taken, each met with the contract's reaction.

mod common;

use common::*;

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
