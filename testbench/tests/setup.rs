//! Connection setup end to end on the behavioural model (spec/iwcm.md): accept from the
//! handler and from another thread, reject, refusals and timeouts, backlog, listeners
//! destroyed under pending requests, private data sizes, MPA v1 and v2, a lossy link.
//! The fixtures put every trace through the rules checker (tests/common).

mod common;

use std::sync::Arc;

use common::{addr, param, report_only, Pair, React, TappedEvent, PORT, QPN};
use iwnic_firmware::FourTuple;
use iwnic_host_driver::{ConnParam, DeviceConfig, Errno, EventKind, IdState};
use iwnic_proto::errno::{ECONNREFUSED, ECONNRESET, ETIMEDOUT};
use iwnic_proto::mpa::{MAX_PRIVATE_DATA, V2_BLOCK_LEN};
use iwnic_testbench::link::LinkConfig;
use iwnic_testbench::model::flow_table_bucket;
use iwnic_testbench::sim::{SimConfig, A_IP, B_IP};

#[test]
fn accept_from_the_handler_then_data_both_ways_and_a_graceful_close() {
    let p = Pair::new();
    let (a_id, b_id) = p.establish(b"hello B", b"hello A");
    // ULPDUs both ways, tagged with each side's connection index.
    let (a_index, b_index) = (
        a_id.connection_index().unwrap(),
        b_id.connection_index().unwrap(),
    );
    let a_link = p.a.device.transport();
    let b_link = p.b.device.transport();
    for n in 0..20u8 {
        let ulpdu: Vec<u8> = (0..(n as usize * 50)).map(|i| i as u8 ^ n).collect();
        a_link.send_ulpdu(a_index, &ulpdu).unwrap();
        assert_eq!(
            b_link.receive_ulpdu(common::PATIENCE).unwrap(),
            (b_index, ulpdu.clone())
        );
        b_link.send_ulpdu(b_index, &ulpdu).unwrap();
        assert_eq!(
            a_link.receive_ulpdu(common::PATIENCE).unwrap(),
            (a_index, ulpdu)
        );
    }
    a_id.disconnect(false).unwrap();
    p.a.expect(EventKind::Close, 0);
    p.b.expect(EventKind::Close, 0);
    let report = p.stop();
    assert_eq!(report.a.datapath.fpdus_in, 20);
    assert_eq!(report.b.datapath.fpdus_in, 20);
    assert_eq!(
        (report.a.datapath.crc_errors, report.b.datapath.crc_errors),
        (0, 0)
    );
    // The responder's datapath took A's RTR (MPA v2, peer-to-peer).
    assert_eq!(
        (report.a.datapath.rtr_taken, report.b.datapath.rtr_taken),
        (0, 1)
    );
}

#[test]
fn accept_from_another_thread() {
    let p = Pair::new();
    let _listener = p.b.sitting_listener(PORT, 8);
    let a_id = p.connect(b"from afar");
    let (child, request) = p.b.expect(EventKind::ConnectRequest, 0);
    assert_eq!(request.private_data, b"from afar");
    assert_eq!(child.state(), Some(IdState::ConnRecv));
    let acceptor = std::thread::spawn(move || child.accept(&param(b"accepted")));
    assert_eq!(acceptor.join().unwrap(), Ok(()));
    p.b.expect(EventKind::Established, 0);
    let (id, reply) = p.a.expect(EventKind::ConnectReply, 0);
    assert_eq!(
        (id, reply.private_data.as_slice()),
        (a_id, &b"accepted"[..])
    );
    p.stop();
}

#[test]
fn reject_reaches_the_initiator_with_its_private_data() {
    let p = Pair::new();
    let on_request: React = Arc::new(|child, _| child.reject(b"not today"));
    let _listener = p.b.listener(PORT, 8, on_request);
    p.connect(b"please");
    let (child, _) = p.b.expect(EventKind::ConnectRequest, 0);
    let (_, reply) = p.a.expect(EventKind::ConnectReply, -ECONNREFUSED);
    assert_eq!(reply.private_data, b"not today");
    assert_eq!(child.state(), Some(IdState::Idle), "a rejected id is IDLE");
    p.a.quiet();
    p.b.quiet();
    let report = p.stop();
    assert_eq!(report.b.firmware.mpa_rejects_sent, 1);
    assert_eq!(report.a.firmware.mpa_rejects_received, 1);
    assert_eq!(
        (report.a.connections, report.b.connections),
        (0, 0),
        "the reject's close ran through TIME_WAIT"
    );
}

#[test]
fn nobody_listening_is_econnrefused() {
    let p = Pair::new();
    p.connect(b"");
    p.a.expect(EventKind::ConnectReply, -ECONNREFUSED);
    let report = p.stop();
    assert_eq!(report.b.firmware.segments_unmatched, 1, "the SYN got a RST");
}

#[test]
fn an_address_that_never_answers_is_etimedout() {
    let p = Pair::new();
    p.a.connecting(
        common::addr([10, 0, 0, 99], PORT),
        b"",
        common::report_only(),
    );
    p.a.expect(EventKind::ConnectReply, -ETIMEDOUT);
    let report = p.stop();
    assert_eq!(report.a.firmware.connect_timeouts, 1);
}

#[test]
fn a_responder_that_never_answers_is_an_mpa_reply_timeout() {
    let p = Pair::new();
    // B's application takes the requests and sits on them.
    let _listener = p.b.sitting_listener(PORT, 8);
    p.connect(b"first");
    let (accepted_late, _) = p.b.expect(EventKind::ConnectRequest, 0);
    p.a.expect(EventKind::ConnectReply, -ETIMEDOUT);
    p.connect(b"second");
    let (rejected_late, _) = p.b.expect(EventKind::ConnectRequest, 0);
    p.a.expect(EventKind::ConnectReply, -ETIMEDOUT);
    // A raises the timeout as it sends its RST. A request sent after it reaches B behind
    // the RST (the link keeps order), so once B sees it, B's NIC has reset the second.
    p.connect(b"marker");
    let (marker, _) = p.b.expect(EventKind::ConnectRequest, 0);
    // A's resets ended both requests under B, with no event in CONN_RECV (as in the
    // kernel): B's late answers find the connections gone.
    assert_eq!(accepted_late.accept(&param(b"")), Err(Errno::ECONNRESET));
    assert_eq!(rejected_late.reject(b"too late"), Err(Errno::ECONNRESET));
    marker.reject(b"").unwrap();
    p.a.expect(EventKind::ConnectReply, -ECONNREFUSED);
    p.b.quiet();
    let report = p.stop();
    assert_eq!(report.a.firmware.mpa_reply_timeouts, 2);
}

/// Private data of `len` bytes both ways on a connection `a_config` initiates.
fn private_data_round_trip(a_config: DeviceConfig, len: usize) {
    let p = Pair::with(SimConfig::default(), a_config);
    let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
    let reply: Vec<u8> = data.iter().rev().copied().collect();
    p.establish(&data, &reply);
    p.stop();
}

#[test]
fn private_data_of_every_size_that_fits_mpa_v2() {
    // MPA v2 carries its 4-byte IRD/ORD block inside the 512 bytes RFC 5044 allows, so
    // the application's part can be at most 508 (the NIC checks; rule 9 strips the block).
    assert_eq!(MAX_PRIVATE_DATA - V2_BLOCK_LEN, 508);
    for len in [0, 1, 255, 256, 508] {
        private_data_round_trip(DeviceConfig::default(), len);
    }
}

#[test]
fn private_data_of_512_bytes_needs_mpa_v1() {
    let v1 = DeviceConfig {
        mpa_v1: true,
        ..DeviceConfig::default()
    };
    for len in [0, 1, 255, 256, 512] {
        private_data_round_trip(v1, len);
    }
}

#[test]
fn mpa_v2_refuses_private_data_beyond_508_bytes() {
    let p = Pair::new();
    // An initiator's connect: the NIC refuses it, the id stays IDLE and gets no event.
    for len in [509, 512] {
        let id = p.a.id(common::report_only());
        id.set_remote_addr(p.b_addr()).unwrap();
        assert_eq!(
            id.connect(&param(&vec![0; len])),
            Err(Errno::EINVAL),
            "{len}"
        );
        assert_eq!(id.state(), Some(IdState::Idle));
    }
    // A responder's accept on a v2 connection: the accept fails (no event ever follows on
    // B) and the connection goes, so A hears a reset.
    let _listener = p.b.sitting_listener(PORT, 8);
    p.connect(b"");
    let (child, _) = p.b.expect(EventKind::ConnectRequest, 0);
    assert_eq!(child.accept(&param(&[0; 509])), Err(Errno::EINVAL));
    assert_eq!(child.state(), Some(IdState::Idle));
    p.a.expect(EventKind::ConnectReply, -ECONNRESET);
    p.a.quiet();
    p.b.quiet();
    p.stop();
}

#[test]
fn mpa_v1_and_v2_initiators_carry_data() {
    for mpa_v1 in [false, true] {
        let p = Pair::with(
            SimConfig::default(),
            DeviceConfig {
                mpa_v1,
                ..DeviceConfig::default()
            },
        );
        let (a_id, b_id) = p.establish(b"which revision?", b"either");
        let (a_index, b_index) = (
            a_id.connection_index().unwrap(),
            b_id.connection_index().unwrap(),
        );
        p.a.device.transport().send_ulpdu(a_index, b"ping").unwrap();
        assert_eq!(
            p.b.device.transport().receive_ulpdu(common::PATIENCE),
            Ok((b_index, b"ping".to_vec())),
            "v1: {mpa_v1}"
        );
        b_id.disconnect(false).unwrap();
        p.b.expect(EventKind::Close, 0);
        p.a.expect(EventKind::Close, 0);
        let report = p.stop();
        // Only the ping reached B's host: a v2 initiator's RTR is the firmware's.
        assert_eq!(report.b.datapath.fpdus_in, 1, "v1: {mpa_v1}");
    }
}

#[test]
fn setup_survives_a_lossy_reordering_link() {
    for seed in 1..4 {
        let link = LinkConfig {
            drop: 0.2,
            duplicate: 0.1,
            reorder: 0.2,
            seed,
            ..LinkConfig::default()
        };
        let p = Pair::with(
            SimConfig {
                link,
                ..SimConfig::default()
            },
            DeviceConfig::default(),
        );
        let (a_id, _) = p.establish(b"lossy", b"ok");
        a_id.disconnect(false).unwrap();
        p.a.expect(EventKind::Close, 0);
        p.b.expect(EventKind::Close, 0);
        let report = p.stop();
        assert!(report.link.dropped > 0, "seed {seed}: {:?}", report.link);
    }
}

/// Rule 10: the backlog bounds requests not yet delivered to the application. Requests
/// its handler has had, answered or not, do not count; requests the driver holds
/// undelivered (the dispatch thread busy) do, and one beyond them gets an MPA reject
/// from the NIC, never reaching B's application.
#[test]
fn an_exhausted_backlog_is_refused_by_the_nic() {
    let p = Pair::new();
    let _listener = p.b.sitting_listener(PORT, 2);
    let is_request = |e: &TappedEvent| e.kind == EventKind::ConnectRequest && e.local_port == PORT;
    // Three requests delivered and left unanswered: more than the backlog, all raised.
    let mut unanswered = vec![];
    for n in 0..3u8 {
        let a_id = p.connect(&[n]);
        let (child, _) = p.b.expect(EventKind::ConnectRequest, 0);
        unanswered.push((a_id, child));
    }
    // B's application is busy: two requests wait in its driver and fill the backlog.
    let hold = p.b.hold_dispatch(&p.a);
    let mut held = vec![];
    for n in 3..5u8 {
        held.push(p.connect(&[n]));
        p.b.wait_for_records(usize::from(n) + 1, is_request);
    }
    let refused = p.connect(b"refused");
    let (id, refusal) = p.a.expect(EventKind::ConnectReply, -ECONNREFUSED);
    assert_eq!((id, refusal.private_data.len()), (refused, 0));
    hold.release();
    for n in 3..5u8 {
        let (child, request) = p.b.expect(EventKind::ConnectRequest, 0);
        assert_eq!(request.private_data, [n]);
        child.reject(b"").unwrap();
    }
    for a_id in held {
        let (id, _) = p.a.expect(EventKind::ConnectReply, -ECONNREFUSED);
        assert_eq!(id, a_id);
    }
    // The delivered ones are still the application's to answer.
    let (first, child) = unanswered.remove(0);
    child.accept(&param(b"")).unwrap();
    p.b.expect(EventKind::Established, 0);
    let (id, _) = p.a.expect(EventKind::ConnectReply, 0);
    assert_eq!(id, first);
    for (_, child) in unanswered {
        child.reject(b"").unwrap();
        p.a.expect(EventKind::ConnectReply, -ECONNREFUSED);
    }
    let report = p.stop();
    assert_eq!(report.b.firmware.backlog_refused, 1);
}

#[test]
fn a_request_delivered_survives_the_destruction_of_its_listener() {
    let p = Pair::new();
    let listener = p.b.sitting_listener(PORT, 8);
    let a_id = p.connect(b"");
    let (child, _) = p.b.expect(EventKind::ConnectRequest, 0);
    listener.destroy();
    child.accept(&param(b"still here")).unwrap();
    p.b.expect(EventKind::Established, 0);
    let (id, reply) = p.a.expect(EventKind::ConnectReply, 0);
    assert_eq!(
        (id, reply.private_data.as_slice()),
        (a_id, &b"still here"[..])
    );
    // The listener is gone from the NIC too.
    p.connect(b"");
    p.a.expect(EventKind::ConnectReply, -ECONNREFUSED);
    p.stop();
}

#[test]
fn a_request_not_yet_delivered_dies_with_its_listener() {
    let p = Pair::new();
    let listener_port = PORT + 1;
    let listener = p.b.sitting_listener(listener_port, 8);
    // B's dispatch thread is held: the request reaches B's driver but not the application.
    let hold = p.b.hold_dispatch(&p.a);
    p.a.connecting(
        common::addr(B_IP, listener_port),
        b"",
        common::report_only(),
    );
    p.b.wait_for_record(|e| e.kind == EventKind::ConnectRequest && e.local_port == listener_port);
    listener.destroy();
    hold.release();
    // The driver rejects what no listener can take; B's application never hears of it.
    let (_, reply) = p.a.expect(EventKind::ConnectReply, -ECONNREFUSED);
    assert!(reply.private_data.is_empty());
    p.b.quiet();
    let report = p.stop();
    assert_eq!(report.b.firmware.mpa_rejects_sent, 2, "the gate's and this");
}

#[test]
fn accept_rejects_parameters_beyond_the_device() {
    let p = Pair::new();
    let _listener = p.b.sitting_listener(PORT, 8);
    p.connect(b"");
    let (child, _) = p.b.expect(EventKind::ConnectRequest, 0);
    let unknown_qp = ConnParam {
        qpn: QPN + 1,
        ..param(b"")
    };
    assert_eq!(child.accept(&unknown_qp), Err(Errno::EINVAL));
    // The failed accept ended the connection: A hears a reset, B nothing.
    p.a.expect(EventKind::ConnectReply, -ECONNRESET);
    p.b.quiet();
    p.stop();
}

/// The datapath's flow table keeps a tuple in its bucket of four ways. A fifth connection
/// whose tuple falls in a bucket four others fill cannot be carried: B's accept fails
/// with -ENOMEM and the NIC resets it (A's one CONNECT_REPLY says so). Once one of the
/// four has closed, the same tuple connects. A picks its local ports so that B's tuples
/// share a bucket.
#[test]
fn a_tuple_whose_flow_table_bucket_is_full_fails_the_accept() {
    let p = Pair::new();
    let _listener = p.b.sitting_listener(PORT, 8);
    let b_tuple = |a_port| FourTuple {
        local_ip: B_IP,
        local_port: PORT,
        remote_ip: A_IP,
        remote_port: a_port,
    };
    let bucket = flow_table_bucket(&b_tuple(50_000));
    let ports: Vec<u16> = (50_000..)
        .filter(|&port| flow_table_bucket(&b_tuple(port)) == bucket)
        .take(5)
        .collect();
    let connect_from = |port| {
        let id = p.a.id(report_only());
        id.set_local_addr(addr(A_IP, port)).unwrap();
        id.set_remote_addr(p.b_addr()).unwrap();
        id.connect(&param(b"")).expect("connect");
        let (child, _) = p.b.expect(EventKind::ConnectRequest, 0);
        (id, child)
    };
    let mut carried = vec![];
    for &port in &ports[..4] {
        let (a_id, child) = connect_from(port);
        child.accept(&param(b"")).unwrap();
        p.b.expect(EventKind::Established, 0);
        p.a.expect(EventKind::ConnectReply, 0);
        carried.push((a_id, child));
    }
    let (refused, child) = connect_from(ports[4]);
    assert_eq!(child.accept(&param(b"")), Err(Errno::ENOMEM));
    let (id, _) = p.a.expect(EventKind::ConnectReply, -ECONNRESET);
    assert_eq!(id, refused);
    p.b.quiet();

    let (a_id, _) = carried.remove(0);
    a_id.disconnect(false).unwrap();
    p.a.expect(EventKind::Close, 0);
    p.b.expect(EventKind::Close, 0);
    let (_, child) = connect_from(ports[4]);
    child.accept(&param(b"")).unwrap();
    p.b.expect(EventKind::Established, 0);
    p.a.expect(EventKind::ConnectReply, 0);
    let report = p.stop();
    assert_eq!(report.b.firmware.flow_table_full, 1);
    assert_eq!(report.b.datapath.flow_table_full, 1);
}
