//! Every row of spec/mpa.md's bad-input table that the other test files do not already
//! drive (they cover the timeouts, RST and SYN exhaustion, the reject, TERM 0x06/0x07 and
//! the datapath's CRC and length reports). Each is counted and leaks nothing.

mod common;

use common::*;
use iwnic_proto::host::Command;
use iwnic_proto::mpa::{FrameKind, REPLY_KEY, REQUEST_KEY};
use iwnic_proto::net::RxDescriptor;

/// Handshake with a listener, then `bytes` (and FIN if asked) as the request. Returns
/// the peer and what the NIC sent in answer (which the peer has not seen).
fn request(bench: &mut Bench, bytes: &[u8], fin: bool) -> (Peer, Vec<Seg>) {
    bench.listen(PORT, 8);
    request_from(bench, 40000, bytes, fin)
}

/// [`request`] from a peer at `port`, to a listener already there.
fn request_from(bench: &mut Bench, port: u16, bytes: &[u8], fin: bool) -> (Peer, Vec<Seg>) {
    let mut peer = Peer::new(port, PORT, 5);
    bench.deliver(peer.syn());
    peer.saw_all(&bench.sent());
    bench.deliver(peer.ack());
    bench.deliver(peer.data(bytes));
    if fin {
        bench.deliver(peer.fin());
    }
    (peer, bench.sent())
}

/// Counters that move for any frame or connection, whatever happens to it.
const BOOKKEEPING: [&str; 4] = [
    "frames_received",
    "frames_sent",
    "resets_sent",
    "connections_closed",
];

/// The counters that moved, bookkeeping aside, are `expected`, once each.
fn assert_counted(bench: &Bench, expected: &[&str]) {
    let moved: Vec<(&str, u32)> = (bench.fw.counters().named())
        .filter(|&(name, n)| n != 0 && !BOOKKEEPING.contains(&name))
        .collect();
    let once: Vec<(&str, u32)> = expected.iter().map(|&name| (name, 1)).collect();
    assert_eq!(moved, once);
}

/// The answer is one RST and nothing else (no reply): at the byte after our SYN-ACK,
/// acknowledging the request's bytes up to `acknowledged`. No event, nothing left.
fn assert_reset_quietly(bench: &mut Bench, peer: &Peer, answer: &[Seg], acknowledged: u32) {
    assert_eq!(kinds(answer), ["RST"], "{answer:?}");
    assert_eq!(
        (answer[0].seq, answer[0].ack),
        (peer.rcv_nxt, Some(acknowledged))
    );
    assert!(bench.out().is_empty(), "no event");
    assert_eq!(bench.fw.connections(), 0);
    assert_eq!(bench.fw.buffers_in_use(), 0);
}

/// The reject to a revision-2 request of IRD = ORD = 16 offering Write and Read, no
/// reason bytes: C, R and the enhanced flag, peer-to-peer with the Write RTR an accept
/// would choose, IRD and ORD crossed. (spec/mpa.md's vector has no RTR type, which
/// irdma's initiator refuses as a bad reply: see `negotiation::reject`.)
const REJECT_V2: [u8; 24] = *b"MPA ID Rep Frame\x70\x02\x00\x04\x80\x10\x80\x10";

/// The answer is `reject` and our FIN in one segment, acknowledging the request; no
/// event. The peer then closes: after TIME_WAIT the connection is gone, its buffer
/// too, without a word to the host.
fn assert_rejected(bench: &mut Bench, mut peer: Peer, answer: &[Seg], reject: &[u8]) {
    let others = bench.fw.connections() - 1;
    assert_eq!(kinds(answer), ["FIN"], "reply with R=1 and FIN");
    assert_eq!(
        (answer[0].seq, answer[0].ack),
        (peer.rcv_nxt, Some(peer.snd_nxt))
    );
    assert_eq!(answer[0].payload, reject);
    assert!(bench.out().is_empty(), "no event");
    peer.saw_all(answer);
    bench.deliver(peer.fin());
    let ack = bench.sent();
    assert_eq!(kinds(&ack), ["ACK"]);
    assert_eq!((ack[0].seq, ack[0].ack), (peer.rcv_nxt, Some(peer.snd_nxt)));
    bench.advance(60_000);
    assert!(bench.sent().iter().all(|s| s.dst_port != peer.port));
    assert!(bench.out().is_empty());
    assert_eq!(bench.fw.connections(), others);
    assert_eq!(bench.fw.buffers_in_use(), 0);
}

#[test]
fn wrong_key() {
    let mut bench = Bench::default();
    let mut bytes = request_v2(OFFER, 16, 16, b"");
    bytes[4] = b'?';
    let (peer, answer) = request(&mut bench, &bytes, false);
    assert_reset_quietly(&mut bench, &peer, &answer, peer.snd_nxt);
    assert_counted(&bench, &["mpa_bad_key"]);
}

#[test]
fn a_reply_key_where_a_request_belongs() {
    let mut bench = Bench::default();
    let bytes = reply(FrameKind::Accept, None, b"");
    let (peer, answer) = request(&mut bench, &bytes, false);
    assert_reset_quietly(&mut bench, &peer, &answer, peer.snd_nxt);
    assert_counted(&bench, &["mpa_bad_key"]);
}

#[test]
fn revision_0_and_3() {
    for revision in [0u8, 3] {
        let mut bench = Bench::default();
        let mut bytes = request_v2(OFFER, 16, 16, b"");
        bytes[17] = revision;
        let (peer, answer) = request(&mut bench, &bytes, false);
        assert_reset_quietly(&mut bench, &peer, &answer, peer.snd_nxt);
        assert_counted(&bench, &["mpa_bad_revision"]);
    }
}

#[test]
fn pd_length_over_512_is_refused_from_the_header() {
    let mut bench = Bench::default();
    let mut header = REQUEST_KEY.to_vec();
    header.extend_from_slice(&[0x40, 0x01]);
    header.extend_from_slice(&513u16.to_be_bytes());
    let (peer, answer) = request(&mut bench, &header, false);
    assert_reset_quietly(&mut bench, &peer, &answer, peer.snd_nxt);
    assert_counted(&bench, &["mpa_private_data_too_long"]);
}

/// The piece is acknowledged as it comes; the FIN behind it is not taken.
#[test]
fn truncated_frame_followed_by_fin() {
    let mut bench = Bench::default();
    let bytes = request_v2(OFFER, 16, 16, b"cut short");
    let (peer, answer) = request(&mut bench, &bytes[..bytes.len() - 3], true);
    let piece_end = peer.snd_nxt - 1;
    assert_eq!(kinds(&answer[..1]), ["ACK"]);
    assert_eq!(
        (answer[0].seq, answer[0].ack),
        (peer.rcv_nxt, Some(piece_end))
    );
    assert_reset_quietly(&mut bench, &peer, &answer[1..], piece_end);
    assert_counted(&bench, &["mpa_truncated"]);
}

#[test]
fn extra_bytes_in_the_request_segment() {
    let mut bench = Bench::default();
    let mut bytes = request_v2(OFFER, 16, 16, b"");
    bytes.extend_from_slice(b"FPDU too early");
    let (peer, answer) = request(&mut bench, &bytes, false);
    assert_reset_quietly(&mut bench, &peer, &answer, peer.snd_nxt);
    assert_counted(&bench, &["mpa_extra_bytes"]);
}

#[test]
fn markers_requested() {
    let mut bench = Bench::default();
    let mut bytes = request_v2(OFFER, 16, 16, b"");
    bytes[16] |= 0x80;
    let (peer, answer) = request(&mut bench, &bytes, false);
    assert_rejected(&mut bench, peer, &answer, &REJECT_V2);
    assert_counted(&bench, &["mpa_markers_refused", "mpa_rejects_sent"]);
}

/// Revision 2 without the block it announces: the reject is revision 2 without one.
#[test]
fn enhanced_flag_without_v2_block() {
    let mut bench = Bench::default();
    let mut bytes = REQUEST_KEY.to_vec();
    bytes.extend_from_slice(&[0x50, 0x02, 0x00, 0x02, 0xAA, 0xBB]);
    let (peer, answer) = request(&mut bench, &bytes, false);
    let reject = [&REPLY_KEY[..], &[0x60, 0x02, 0x00, 0x00]].concat();
    assert_rejected(&mut bench, peer, &answer, &reject);
    assert_counted(&bench, &["mpa_missing_v2_block", "mpa_rejects_sent"]);
}

#[test]
fn backlog_full_rejects_and_counts() {
    let mut bench = Bench::default();
    let listener = bench.listen(PORT, 1);
    let request = request_v2(OFFER, 16, 16, b"");
    let (_, raised) = request_from(&mut bench, 40000, &request, false);
    assert!(raised.is_empty(), "the request's ACK waits for the reply");
    let out = bench.out();
    assert_eq!(briefs(&out), ["ConnectRequest(0)"]);
    assert_eq!(event(&out[0]).listener, listener);
    let (peer, refused) = request_from(&mut bench, 40001, &request, false);
    assert_rejected(&mut bench, peer, &refused, &REJECT_V2);
    assert_eq!(bench.fw.counters().backlog_refused, 1);
    // Once the first is accepted, the backlog has room again.
    bench.command(Command::Accept {
        conn: event(&out[0]).conn,
        ird: 1,
        ord: 1,
        qpn: 1,
        private_data: b"",
    });
    bench.out();
    bench.sent();
    request_from(&mut bench, 40002, &request, false);
    assert_eq!(briefs(&bench.out()), ["ConnectRequest(0)"]);
}

#[test]
fn undecodable_commands_complete_with_einval() {
    let mut bench = Bench::default();
    let mut record = vec![0x09, 0, 64, 0, 42, 0, 0, 0];
    record.resize(64, 0);
    bench.hal.commands.push_back(record);
    bench.hal.commands.push_back(vec![1, 2, 3]);
    bench.poll();
    let out = bench.out();
    assert_eq!(
        briefs(&out),
        [format!("DONE({})", -iwnic_proto::errno::EINVAL)]
    );
    assert_eq!(done(&out[0]).tag, 42);
    assert_eq!(bench.fw.counters().bad_commands, 2);
    // The register window sees them by the next millisecond.
    bench.advance(1);
    assert_eq!(bench.hal.counters.bad_commands, 2);
    assert_eq!(bench.hal.counters, *bench.fw.counters());
}

#[test]
fn frames_not_for_us_are_ignored() {
    let mut bench = Bench::default();
    bench.listen(PORT, 8);
    // A good SYN to another address: the datapath filters these, the firmware does not
    // rely on it.
    let mut syn = Peer::new(40000, PORT, 5).syn();
    syn[33] = 99;
    fix_checksums(&mut syn);
    bench.deliver(syn);
    // What the datapath's parser drops never reaches the firmware.
    bench.deliver(vec![0u8; 10]);
    assert!(bench.sent().is_empty());
    assert_eq!(bench.fw.counters().frames_ignored, 1);
    assert_eq!(bench.hal.parser_drops, 1);
    assert_eq!(bench.fw.connections(), 0);
}

#[test]
fn a_descriptor_that_does_not_fit_its_frame_is_ignored() {
    let mut bench = Bench::default();
    bench.listen(PORT, 8);
    let syn = Peer::new(40000, PORT, 5).syn();
    let fits = RxDescriptor::of_frame(&syn).unwrap();
    let cut = syn[..40].to_vec();
    bench.deliver_described(fits, cut);
    let beyond = RxDescriptor {
        payload_len: 2000,
        ..fits
    };
    bench.deliver_described(beyond, syn.clone());
    let no_port = RxDescriptor {
        src_port: 0,
        ..fits
    };
    bench.deliver_described(no_port, syn);
    assert!(bench.sent().is_empty());
    assert_eq!(bench.fw.counters().frames_ignored, 3);
    assert_eq!(bench.fw.connections(), 0);
}
