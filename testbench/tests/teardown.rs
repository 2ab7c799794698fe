//! Connection teardown end to end on the behavioural model (spec/iwcm.md): disconnect
//! from either side, destroy in every state, and a handler returning non-zero on every
//! event (rule 7). The fixtures put every trace through the rules checker (tests/common).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{param, wait_until, Pair, React, TracedId, PORT};
use iwnic_host_driver::{Errno, EventKind, IdState};
use iwnic_proto::errno::{ECONNREFUSED, ECONNRESET};

#[test]
fn disconnect_from_either_side_closes_both() {
    for a_closes in [true, false] {
        for abrupt in [false, true] {
            let p = Pair::new();
            let (a_id, b_id) = p.establish(b"", b"");
            let (closer, closer_host, other_host) = if a_closes {
                (a_id, &p.a, &p.b)
            } else {
                (b_id, &p.b, &p.a)
            };
            // The id is CLOSING now, but its CLOSE may already be dispatched (rule 2's
            // race): only the end state is certain.
            closer.disconnect(abrupt).unwrap();
            // An orderly close is CLOSE 0 on both ends, a reset -ECONNRESET (rule 6).
            let status = if abrupt { -ECONNRESET } else { 0 };
            let (id, _) = closer_host.expect(EventKind::Close, status);
            assert_eq!(id, closer);
            other_host.expect(EventKind::Close, status);
            assert_eq!(closer.state(), Some(IdState::Idle));
            p.a.quiet();
            p.b.quiet();
            let report = p.stop();
            // An abrupt close sends RST. (A graceful one may too, legitimately, if a late
            // retransmission meets a TIME_WAIT already over: the statuses above are what
            // make a close orderly.)
            if abrupt {
                let resets = report.a.firmware.resets_sent + report.b.firmware.resets_sent;
                assert!(resets >= 1, "A closes: {a_closes}");
            }
        }
    }
}

#[test]
fn destroy_in_idle_forgets_the_id() {
    let p = Pair::new();
    let id = p.a.id(common::report_only());
    let probe = id.clone();
    assert_eq!(p.a.device.id_count(), 1);
    id.destroy();
    assert_eq!(probe.state(), None);
    assert_eq!(p.a.device.id_count(), 0);
    assert_eq!(
        probe.listen(1),
        Err(Errno::EINVAL),
        "calls on it are -EINVAL"
    );
    p.stop();
}

#[test]
fn destroy_in_listen_stops_listening() {
    let p = Pair::new();
    let listener = p.b.sitting_listener(PORT, 8);
    listener.destroy();
    p.connect(b"");
    p.a.expect(EventKind::ConnectReply, -ECONNREFUSED);
    p.b.quiet();
    p.stop();
}

#[test]
fn destroy_in_conn_recv_rejects_the_request() {
    let p = Pair::new();
    let _listener = p.b.sitting_listener(PORT, 8);
    p.connect(b"");
    let (child, _) = p.b.expect(EventKind::ConnectRequest, 0);
    child.destroy();
    let (_, reply) = p.a.expect(EventKind::ConnectReply, -ECONNREFUSED);
    assert!(reply.private_data.is_empty());
    p.b.quiet();
    p.stop();
}

#[test]
fn destroy_in_conn_sent_resets_the_attempt() {
    let p = Pair::new();
    let _listener = p.b.sitting_listener(PORT, 8);
    // A's dispatch is held so its id stays in CONN_SENT whatever the NIC raises.
    let hold = p.a.hold_dispatch(&p.b);
    let a_id = p.connect(b"");
    let (request_under_b, _) = p.b.expect(EventKind::ConnectRequest, 0);
    assert_eq!(a_id.state(), Some(IdState::ConnSent));
    a_id.destroy();
    hold.release();
    // The reset reached B before a later request (the link keeps order): B's answer to
    // the first finds it gone, with no event in CONN_RECV.
    p.connect(b"marker");
    let (marker, _) = p.b.expect(EventKind::ConnectRequest, 0);
    assert_eq!(request_under_b.accept(&param(b"")), Err(Errno::ECONNRESET));
    marker.reject(b"").unwrap();
    // Rule 8: the destroyed id hears nothing; only the marker's refusal comes.
    p.a.expect(EventKind::ConnectReply, -ECONNREFUSED);
    p.a.quiet();
    p.b.quiet();
    p.stop();
}

#[test]
fn destroy_in_established_aborts_the_connection() {
    let p = Pair::new();
    let (a_id, _) = p.establish(b"", b"");
    a_id.destroy();
    p.b.expect(EventKind::Close, -ECONNRESET);
    p.a.quiet();
    let report = p.stop();
    assert_eq!(report.a.firmware.resets_sent, 1);
}

#[test]
fn destroy_in_closing_lets_the_orderly_close_finish_silently() {
    let p = Pair::new();
    let (a_id, _) = p.establish(b"", b"");
    // With A's dispatch held, A's CLOSE waits in the driver and the id stays CLOSING.
    let hold = p.a.hold_dispatch(&p.b);
    a_id.disconnect(false).unwrap();
    assert_eq!(a_id.state(), Some(IdState::Closing));
    a_id.destroy();
    hold.release();
    p.b.expect(EventKind::Close, 0);
    // Rule 8: the CLOSE queued for the destroyed id is dropped.
    p.a.quiet();
    let report = p.stop();
    assert_eq!(
        report.a.firmware.resets_sent + report.b.firmware.resets_sent,
        0,
        "no reset: the FIN exchange completed"
    );
}

#[test]
fn a_handler_failing_on_connect_request_rejects_and_destroys_the_child_only() {
    let p = Pair::new();
    let refused_one = Arc::new(AtomicBool::new(false));
    let on_request: React = {
        let refused_one = Arc::clone(&refused_one);
        Arc::new(move |child, event| match event.event {
            EventKind::ConnectRequest if !refused_one.swap(true, Ordering::SeqCst) => {
                Err(Errno::ENOMEM)
            }
            EventKind::ConnectRequest => child.accept(&param(b"second")),
            _ => Ok(()),
        })
    };
    let listener = p.b.listener(PORT, 8, on_request);
    p.connect(b"");
    let (child, _) = p.b.expect(EventKind::ConnectRequest, 0);
    p.a.expect(EventKind::ConnectReply, -ECONNREFUSED);
    wait_until("the failed child destroyed", || child.state().is_none());
    assert_eq!(listener.state(), Some(IdState::Listen));
    // The listener is untouched: the next request is accepted.
    p.established(b"", b"second");
    p.stop();
}

#[test]
fn a_handler_failing_on_connect_reply_destroys_the_id() {
    let p = Pair::new();
    let _listener = p.b.accepting_listener(PORT, b"");
    let fail_on_reply: React = Arc::new(|_, event| match event.event {
        EventKind::ConnectReply => Err(Errno::ENOMEM),
        _ => Ok(()),
    });
    let a_id = p.a.connecting(p.b_addr(), b"", fail_on_reply);
    p.a.expect(EventKind::ConnectReply, 0);
    p.b.expect(EventKind::ConnectRequest, 0);
    p.b.expect(EventKind::Established, 0);
    // The driver aborted the connection of the destroyed id.
    p.b.expect(EventKind::Close, -ECONNRESET);
    wait_until("the failed id destroyed", || a_id.state().is_none());
    p.a.quiet();
    p.stop();
}

#[test]
fn a_handler_failing_on_established_destroys_the_id() {
    let p = Pair::new();
    let on_event: React = Arc::new(|child, event| match event.event {
        EventKind::ConnectRequest => child.accept(&param(b"")),
        EventKind::Established => Err(Errno::ENOMEM),
        _ => Ok(()),
    });
    let _listener = p.b.listener(PORT, 8, on_event);
    let a_id = p.connect(b"");
    p.b.expect(EventKind::ConnectRequest, 0);
    let (b_id, _) = p.b.expect(EventKind::Established, 0);
    p.a.expect(EventKind::ConnectReply, 0);
    let (id, _) = p.a.expect(EventKind::Close, -ECONNRESET);
    assert_eq!(id, a_id);
    wait_until("the failed id destroyed", || b_id.state().is_none());
    p.b.quiet();
    p.stop();
}

#[test]
fn a_handler_failing_on_close_destroys_the_id() {
    let p = Pair::new();
    let _listener = p.b.accepting_listener(PORT, b"");
    let fail_on_close: React = Arc::new(|_, event| match event.event {
        EventKind::Close => Err(Errno::ENOMEM),
        _ => Ok(()),
    });
    let a_id: TracedId = p.a.connecting(p.b_addr(), b"", fail_on_close);
    p.b.expect(EventKind::ConnectRequest, 0);
    p.b.expect(EventKind::Established, 0);
    p.a.expect(EventKind::ConnectReply, 0);
    a_id.disconnect(false).unwrap();
    p.a.expect(EventKind::Close, 0);
    p.b.expect(EventKind::Close, 0);
    wait_until("the failed id destroyed", || a_id.state().is_none());
    p.stop();
}
