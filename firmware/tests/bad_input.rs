//! Every row of spec/mpa.md's bad-input table that the other test files do not already
//! drive (they cover the timeouts, RST and SYN exhaustion, the reject, TERM 0x06/0x07 and
//! the datapath's CRC and length reports). Each is counted and leaks nothing.

mod common;

use common::*;
use iwnic_proto::host::Command;
use iwnic_proto::mpa::{FrameKind, RtrTypes, REQUEST_KEY};
use iwnic_proto::net::RxDescriptor;

const OFFER: RtrTypes = RtrTypes {
    send: false,
    write: true,
    read: true,
};

/// Handshake with a listener, then `bytes` (and FIN if asked) as the request. Returns
/// what the NIC sent in answer.
fn request(bench: &mut Bench, bytes: &[u8], fin: bool) -> Vec<Seg> {
    bench.listen(PORT, 8);
    let mut peer = Peer::new(40000, PORT, 5);
    bench.deliver(peer.syn());
    peer.saw_all(&bench.sent());
    bench.deliver(peer.ack());
    bench.deliver(peer.data(bytes));
    if fin {
        bench.deliver(peer.fin());
    }
    bench.sent()
}

fn assert_reset_quietly(bench: &mut Bench, answer: &[Seg]) {
    assert_eq!(*kinds(answer).last().unwrap(), "RST", "{answer:?}");
    assert!(answer.iter().all(|s| s.payload.is_empty()), "no reply");
    assert!(bench.out().is_empty(), "no event");
    assert_eq!(bench.fw.connections(), 0);
    assert_eq!(bench.fw.buffers_in_use(), 0);
}

fn assert_rejected(bench: &mut Bench, answer: &[Seg]) {
    assert_eq!(kinds(answer), ["FIN"], "reply with R=1 and FIN");
    assert_eq!(parse_mpa(&answer[0].payload).kind, FrameKind::Reject);
    assert!(bench.out().is_empty(), "no event");
}

#[test]
fn wrong_key() {
    let mut bench = Bench::default();
    let mut bytes = request_v2(OFFER, 16, 16, b"");
    bytes[4] = b'?';
    let answer = request(&mut bench, &bytes, false);
    assert_reset_quietly(&mut bench, &answer);
    assert_eq!(bench.fw.counters().mpa_bad_key, 1);
}

#[test]
fn a_reply_key_where_a_request_belongs() {
    let mut bench = Bench::default();
    let answer = request(&mut bench, &reply(FrameKind::Accept, None, b""), false);
    assert_reset_quietly(&mut bench, &answer);
}

#[test]
fn revision_0_and_3() {
    for revision in [0u8, 3] {
        let mut bench = Bench::default();
        let mut bytes = request_v2(OFFER, 16, 16, b"");
        bytes[17] = revision;
        let answer = request(&mut bench, &bytes, false);
        assert_reset_quietly(&mut bench, &answer);
        assert_eq!(bench.fw.counters().mpa_bad_revision, 1);
    }
}

#[test]
fn pd_length_over_512_is_refused_from_the_header() {
    let mut bench = Bench::default();
    let mut header = REQUEST_KEY.to_vec();
    header.extend_from_slice(&[0x40, 0x01]);
    header.extend_from_slice(&513u16.to_be_bytes());
    let answer = request(&mut bench, &header, false);
    assert_reset_quietly(&mut bench, &answer);
    assert_eq!(bench.fw.counters().mpa_private_data_too_long, 1);
}

#[test]
fn truncated_frame_followed_by_fin() {
    let mut bench = Bench::default();
    let bytes = request_v2(OFFER, 16, 16, b"cut short");
    let answer = request(&mut bench, &bytes[..bytes.len() - 3], true);
    assert_reset_quietly(&mut bench, &answer[1..]);
    assert_eq!(bench.fw.counters().mpa_truncated, 1);
}

#[test]
fn extra_bytes_in_the_request_segment() {
    let mut bench = Bench::default();
    let mut bytes = request_v2(OFFER, 16, 16, b"");
    bytes.extend_from_slice(b"FPDU too early");
    let answer = request(&mut bench, &bytes, false);
    assert_reset_quietly(&mut bench, &answer);
    assert_eq!(bench.fw.counters().mpa_extra_bytes, 1);
}

#[test]
fn markers_requested() {
    let mut bench = Bench::default();
    let mut bytes = request_v2(OFFER, 16, 16, b"");
    bytes[16] |= 0x80;
    let answer = request(&mut bench, &bytes, false);
    assert_rejected(&mut bench, &answer);
    assert_eq!(bench.fw.counters().mpa_markers_refused, 1);
}

#[test]
fn enhanced_flag_without_v2_block() {
    let mut bench = Bench::default();
    let mut bytes = REQUEST_KEY.to_vec();
    bytes.extend_from_slice(&[0x50, 0x02, 0x00, 0x02, 0xAA, 0xBB]);
    let answer = request(&mut bench, &bytes, false);
    assert_rejected(&mut bench, &answer);
    assert_eq!(bench.fw.counters().mpa_missing_v2_block, 1);
}

#[test]
fn backlog_full_rejects_and_counts() {
    let mut bench = Bench::default();
    let listener = bench.listen(PORT, 1);
    let mut raised = Vec::new();
    for port in [40000u16, 40001] {
        let mut peer = Peer::new(port, PORT, 5);
        bench.deliver(peer.syn());
        peer.saw_all(&bench.sent());
        bench.deliver(peer.ack());
        bench.deliver(peer.data(&request_v2(OFFER, 16, 16, b"")));
        raised.push((bench.sent(), bench.out()));
    }
    assert_eq!(briefs(&raised[0].1), ["ConnectRequest(0)"]);
    assert_eq!(event(&raised[0].1[0]).listener, listener);
    assert_rejected(&mut bench, &raised[1].0);
    assert_eq!(bench.fw.counters().backlog_refused, 1);
    // Once the first is accepted, the backlog has room again.
    let conn = event(&raised[0].1[0]).conn;
    bench.command(Command::Accept {
        conn,
        ird: 1,
        ord: 1,
        qpn: 1,
        private_data: b"",
    });
    bench.out();
    bench.sent();
    let mut peer = Peer::new(40002, PORT, 5);
    bench.deliver(peer.syn());
    peer.saw_all(&bench.sent());
    bench.deliver(peer.ack());
    bench.deliver(peer.data(&request_v2(OFFER, 16, 16, b"")));
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
