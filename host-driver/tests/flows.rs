//! Connection flows end to end against the scripted NIC: passive (accept from the handler
//! and from another thread, reject), active (connect, refused, disconnect), and the
//! rules checker over all of them.

mod common;

use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};

use common::{local_addr, peer_addr, Harness, PORT, QPN};
use iwnic_host_driver::errno::{ECONNREFUSED, ECONNRESET, ETIMEDOUT};
use iwnic_host_driver::rules::Call;
use iwnic_host_driver::{reject_msg, ConnParam, Errno, EventKind, IdState};
use iwnic_proto::host::CommandKind;

fn accept_param() -> ConnParam {
    ConnParam {
        private_data: b"welcome".to_vec(),
        ord: 2,
        ird: 3,
        qpn: QPN,
    }
}

#[test]
fn accept_from_the_connect_request_handler() {
    let h = Harness::new();
    let checker = h.checker.clone();
    let (listener, seen, handle) = h.listener_with(move |id, event| {
        if event.event == EventKind::ConnectRequest {
            checker.call(id, Call::Accept, || id.accept(&accept_param()))?;
        }
        Ok(())
    });
    h.nic.connect_request(handle, b"hello");

    let (child, request) = Harness::next_event(&seen);
    assert_ne!(child, listener);
    assert_eq!(request.event, EventKind::ConnectRequest);
    assert_eq!(request.private_data, b"hello");
    assert_eq!(
        (request.ird, request.ord),
        (5, 6),
        "the initiator's IRD/ORD"
    );
    assert_eq!(request.remote_addr, peer_addr());
    assert_eq!(child.remote_addr(), Some(peer_addr()));
    assert_eq!(listener.state(), Some(IdState::Listen));

    let (id, established) = Harness::next_event(&seen);
    assert_eq!(id, child);
    assert_eq!(established.event, EventKind::Established);
    // Rule 9: local ORD (2) in `ird`, local IRD (3) in `ord`.
    assert_eq!((established.ird, established.ord), (2, 3));
    assert_eq!(child.state(), Some(IdState::Established));
    let accept = h
        .nic
        .received()
        .into_iter()
        .find(|c| c.kind == CommandKind::Accept)
        .unwrap();
    assert_eq!(
        (accept.ird, accept.ord, accept.private_data),
        (3, 2, b"welcome".to_vec())
    );

    // The peer's FIN is not passed on; CLOSE is, and the id is IDLE again.
    h.nic.peer_closes(accept.handle, false);
    let (_, close) = Harness::next_event(&seen);
    assert_eq!((close.event, close.status), (EventKind::Close, 0));
    assert_eq!(child.state(), Some(IdState::Idle));
    h.settle();
    assert!(common::drain(&seen).is_empty());
    h.checker.assert_clean();
    assert_eq!(h.device.stats(), Default::default());
}

#[test]
fn child_ids_get_the_listeners_context() {
    let h = Harness::new();
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    let listener = h
        .device
        .create_cm_id(
            move |id, _| {
                let context = id.context().unwrap();
                tx.lock()
                    .unwrap()
                    .send(*context.downcast_ref::<u32>().unwrap())
                    .unwrap();
                Ok(())
            },
            Arc::new(42u32),
        )
        .unwrap();
    listener.set_local_addr(local_addr(PORT)).unwrap();
    listener.listen(0).unwrap();
    h.nic.connect_request(h.nic.last_handle(), b"");
    assert_eq!(rx.recv_timeout(common::PATIENCE).unwrap(), 42);
}

#[test]
fn accept_from_another_thread() {
    let h = Harness::new();
    let (_listener, seen, handle) = h.listener_with(|_, _| Ok(()));
    let conn = h.nic.connect_request(handle, b"");
    let (child, _) = Harness::next_event(&seen);
    assert_eq!(child.state(), Some(IdState::ConnRecv));

    let (checker, acceptor) = (h.checker.clone(), child.clone());
    std::thread::spawn(move || {
        checker.call(&acceptor, Call::Accept, || acceptor.accept(&accept_param()))
    })
    .join()
    .unwrap()
    .unwrap();
    let (_, established) = Harness::next_event(&seen);
    assert_eq!(established.event, EventKind::Established);
    assert_eq!(child.state(), Some(IdState::Established));

    h.checker
        .call(&child, Call::Disconnect, || child.disconnect(false))
        .unwrap();
    let disconnect = h
        .nic
        .received()
        .into_iter()
        .rfind(|c| c.kind == CommandKind::Disconnect)
        .unwrap();
    assert_eq!((disconnect.handle, disconnect.abrupt), (conn, false));
    let (_, close) = Harness::next_event(&seen);
    assert_eq!((close.event, close.status), (EventKind::Close, 0));
    h.checker.assert_clean();
}

#[test]
fn reject_sends_the_private_data_and_ends_the_id() {
    let h = Harness::new();
    let checker = h.checker.clone();
    let (_listener, seen, handle) = h.listener_with(move |id, event| {
        if event.event == EventKind::ConnectRequest {
            checker.call(id, Call::Reject, || id.reject(b"go away"))?;
        }
        Ok(())
    });
    let conn = h.nic.connect_request(handle, b"");
    let (child, _) = Harness::next_event(&seen);
    h.settle();
    assert_eq!(child.state(), Some(IdState::Idle));
    let reject = h
        .nic
        .received()
        .into_iter()
        .find(|c| c.kind == CommandKind::Reject)
        .unwrap();
    assert_eq!(
        (reject.handle, reject.private_data),
        (conn, b"go away".to_vec())
    );
    // Nothing more reaches the id, whatever the NIC still says about the connection.
    h.nic.peer_closes(conn, true);
    h.settle();
    assert!(common::drain(&seen).is_empty());
    h.checker.assert_clean();
}

#[test]
fn reject_after_the_connection_died_is_econnreset() {
    let h = Harness::new();
    let (_listener, seen, handle) = h.listener_with(|_, _| Ok(()));
    let conn = h.nic.connect_request(handle, b"");
    let (child, _) = Harness::next_event(&seen);
    h.nic.request_dies(conn);
    assert_eq!(child.reject(&[]), Err(Errno::ECONNRESET));
    assert_eq!(child.state(), Some(IdState::Idle));
}

#[test]
fn accept_after_the_connection_died_fails_and_no_event_follows() {
    let h = Harness::new();
    let (_listener, seen, handle) = h.listener_with(|_, _| Ok(()));
    let conn = h.nic.connect_request(handle, b"");
    let (child, _) = Harness::next_event(&seen);
    h.nic.request_dies(conn);
    assert_eq!(
        h.checker
            .call(&child, Call::Accept, || child.accept(&accept_param())),
        Err(Errno::ECONNRESET)
    );
    assert_eq!(child.state(), Some(IdState::Idle));
    h.settle();
    assert!(common::drain(&seen).is_empty());
    h.checker.assert_clean();
}

#[test]
fn accept_beyond_the_nics_ird_limit_fails_with_einval() {
    let h = Harness::new();
    let (_listener, seen, handle) = h.listener_with(|_, _| Ok(()));
    h.nic.connect_request(handle, b"");
    let (child, _) = Harness::next_event(&seen);
    let param = ConnParam {
        ird: 65,
        ..accept_param()
    };
    assert_eq!(child.accept(&param), Err(Errno::EINVAL));
    assert_eq!(child.state(), Some(IdState::Idle));
}

#[test]
fn accept_with_an_unknown_qpn_fails_and_the_nic_forgets_the_connection() {
    let h = Harness::new();
    let (_listener, seen, handle) = h.listener_with(|_, _| Ok(()));
    let conn = h.nic.connect_request(handle, b"");
    let (child, _) = Harness::next_event(&seen);
    let param = ConnParam {
        qpn: QPN + 1,
        ..accept_param()
    };
    assert_eq!(child.accept(&param), Err(Errno::EINVAL));
    assert_eq!(child.state(), Some(IdState::Idle));
    h.settle();
    let release = h
        .nic
        .received()
        .into_iter()
        .find(|c| c.kind == CommandKind::Release)
        .unwrap();
    assert_eq!(release.handle, conn);
}

#[test]
fn connect_gets_exactly_one_connect_reply() {
    let h = Harness::new();
    let (id, seen) = h.id();
    id.set_remote_addr(peer_addr()).unwrap();
    let param = ConnParam {
        private_data: b"hi".to_vec(),
        ord: 2,
        ird: 3,
        qpn: QPN,
    };
    h.checker
        .call(&id, Call::Connect, || id.connect(&param))
        .unwrap();
    let (_, reply) = Harness::next_event(&seen);
    assert_eq!((reply.event, reply.status), (EventKind::ConnectReply, 0));
    assert_eq!(
        (reply.ird, reply.ord),
        (2, 3),
        "local ORD in ird, local IRD in ord"
    );
    assert_eq!(id.state(), Some(IdState::Established));
    assert_eq!(
        id.local_addr(),
        Some(local_addr(PORT)),
        "the real local address"
    );
    let connect = h
        .nic
        .received()
        .into_iter()
        .find(|c| c.kind == CommandKind::Connect)
        .unwrap();
    assert_eq!(
        (connect.ird, connect.ord, connect.private_data),
        (3, 2, b"hi".to_vec())
    );

    h.checker
        .call(&id, Call::Disconnect, || id.disconnect(true))
        .unwrap();
    // (CLOSING until the CLOSE the NIC pushes right behind the completion is dispatched.)
    let (_, close) = Harness::next_event(&seen);
    assert_eq!((close.event, close.status), (EventKind::Close, -ECONNRESET));
    assert_eq!(id.state(), Some(IdState::Idle));
    let disconnect = h
        .nic
        .received()
        .into_iter()
        .find(|c| c.kind == CommandKind::Disconnect)
        .unwrap();
    assert!(disconnect.abrupt);
    h.checker.assert_clean();
}

#[test]
fn a_refused_connect_reports_and_the_id_cannot_connect_again() {
    let h = Harness::new();
    h.nic.set_auto_connect_reply(Some(-ECONNREFUSED));
    let (id, seen) = h.id();
    id.set_remote_addr(peer_addr()).unwrap();
    h.checker
        .call(&id, Call::Connect, || id.connect(&h.param()))
        .unwrap();
    let (_, reply) = Harness::next_event(&seen);
    assert_eq!(reply.status, -ECONNREFUSED);
    assert_eq!(reject_msg(reply.status), "refused by remote application");
    assert_eq!(id.state(), Some(IdState::Idle));
    assert_eq!(
        id.connect(&h.param()),
        Err(Errno::EINVAL),
        "stricter: one attempt per id"
    );
    h.checker.assert_clean();
}

#[test]
fn disconnect_in_conn_sent_gives_the_attempt_up_with_one_reply() {
    let h = Harness::new();
    h.nic.set_auto_connect_reply(None);
    let (id, seen) = h.id();
    id.set_remote_addr(peer_addr()).unwrap();
    h.checker
        .call(&id, Call::Connect, || id.connect(&h.param()))
        .unwrap();
    assert_eq!(id.state(), Some(IdState::ConnSent));
    h.checker
        .call(&id, Call::Disconnect, || id.disconnect(false))
        .unwrap();
    let (_, reply) = Harness::next_event(&seen);
    assert_eq!(
        (reply.event, reply.status),
        (EventKind::ConnectReply, -ECONNRESET)
    );
    assert_eq!(id.state(), Some(IdState::Idle));
    h.checker.assert_clean();
}

#[test]
fn connect_reply_of_the_peer_carries_its_private_data() {
    let h = Harness::new();
    h.nic.set_auto_connect_reply(None);
    let (id, seen) = h.id();
    id.set_remote_addr(peer_addr()).unwrap();
    id.connect(&h.param()).unwrap();
    let full = vec![0xA5; 512];
    h.nic.connect_reply(h.nic.last_handle(), 0, &full);
    let (_, reply) = Harness::next_event(&seen);
    assert_eq!(
        reply.private_data, full,
        "the Rust API carries all 512 bytes"
    );
}

#[test]
fn a_failed_listen_leaves_the_id_idle_and_listen_may_be_retried() {
    let h = Harness::new();
    h.nic
        .set_listen_status(-iwnic_host_driver::errno::EADDRINUSE);
    let (id, _) = h.id();
    id.set_local_addr(local_addr(PORT)).unwrap();
    assert_eq!(
        id.listen(4).map_err(|e| e.get()),
        Err(-iwnic_host_driver::errno::EADDRINUSE)
    );
    assert_eq!(id.state(), Some(IdState::Idle));
    h.nic.set_listen_status(0);
    id.listen(4).unwrap();
    assert_eq!(id.state(), Some(IdState::Listen));
}

#[test]
fn init_qp_attr_gives_the_kernels_masks() {
    use iwnic_host_driver::cm::*;
    let h = Harness::new();
    let (id, _) = h.id();
    for state in [QpState::Init, QpState::Rtr] {
        let update = id.init_qp_attr(state).unwrap();
        assert_eq!(update.mask, IB_QP_STATE | IB_QP_ACCESS_FLAGS);
        assert_eq!(
            update.qp_access_flags,
            IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ
        );
    }
    assert_eq!(id.init_qp_attr(QpState::Rts).unwrap().mask, 0);
    for state in [QpState::Reset, QpState::Sqd, QpState::Sqe, QpState::Err] {
        assert_eq!(id.init_qp_attr(state), Err(Errno::EINVAL));
    }
}

#[test]
fn reject_msg_has_the_kernels_words() {
    assert_eq!(reject_msg(-ECONNRESET), "reset by remote host");
    assert_eq!(reject_msg(-ECONNREFUSED), "refused by remote application");
    assert_eq!(reject_msg(-ETIMEDOUT), "setup timeout");
    assert_eq!(reject_msg(-22), "unrecognized reason");
    assert_eq!(reject_msg(0), "unrecognized reason");
}

#[test]
fn many_connections_are_dispatched_in_order_one_at_a_time() {
    let h = Harness::new();
    let checker = h.checker.clone();
    let (_listener, seen, handle) = h.listener_with(move |id, event| {
        if event.event == EventKind::ConnectRequest {
            checker.call(id, Call::Accept, || id.accept(&accept_param()))?;
        }
        Ok(())
    });
    let conns: Vec<u32> = (0..20)
        .map(|_| h.nic.connect_request(handle, b""))
        .collect();
    let mut established = 0;
    while established < conns.len() {
        if Harness::next_event(&seen).1.event == EventKind::Established {
            established += 1;
        }
    }
    for conn in &conns {
        h.nic.peer_closes(*conn, false);
    }
    let closes = (0..conns.len())
        .filter(|_| Harness::next_event(&seen).1.event == EventKind::Close)
        .count();
    assert_eq!(closes, conns.len());
    h.checker.assert_clean();
}
