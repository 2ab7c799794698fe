//! Rule 7 (a non-zero handler return destroys the id) for every event type an application
//! sees, panicking handlers, and destroy called from inside a handler.

mod common;

use common::{peer_addr, Harness, QPN};
use iwnic_host_driver::rules::Call;
use iwnic_host_driver::{ConnParam, Errno, EventKind, IdState};
use iwnic_proto::host::CommandKind;

fn accept_param() -> ConnParam {
    ConnParam {
        qpn: QPN,
        ird: 1,
        ord: 1,
        ..ConnParam::default()
    }
}

#[test]
fn failing_the_connect_request_rejects_the_child_and_keeps_the_listener() {
    let h = Harness::new();
    let (listener, seen, handle) = h.listener_with(|_, event| match event.event {
        EventKind::ConnectRequest if event.private_data == b"unwanted" => Err(Errno::ECONNREFUSED),
        _ => Ok(()),
    });
    let conn = h.nic.connect_request(handle, b"unwanted");
    let (child, _) = Harness::next_event(&seen);
    h.settle();
    assert_eq!(child.state(), None, "the child is destroyed");
    assert!(h.nic.handles_of(CommandKind::Reject).contains(&conn));
    assert_eq!(listener.state(), Some(IdState::Listen));
    // The listener still takes requests.
    h.nic.connect_request(handle, b"welcome");
    let (second, _) = Harness::next_event(&seen);
    assert_eq!(second.state(), Some(IdState::ConnRecv));
    h.checker.assert_clean();
}

#[test]
fn failing_after_accepting_the_request_aborts_the_accepted_connection() {
    let h = Harness::new();
    let (_listener, seen, handle) = h.listener_with(|id, _| {
        id.accept(&accept_param())?;
        Err(Errno::EINVAL)
    });
    let conn = h.nic.connect_request(handle, b"");
    let (child, _) = Harness::next_event(&seen);
    h.settle();
    assert_eq!(child.state(), None);
    assert_eq!(h.nic.handles_of(CommandKind::Release), [conn]);
    assert!(!h.nic.handles_of(CommandKind::Reject).contains(&conn));
    assert!(
        common::drain(&seen).is_empty(),
        "ESTABLISHED dropped with the id"
    );
    h.checker.assert_clean();
}

#[test]
fn failing_connect_reply_destroys_the_id() {
    let h = Harness::new();
    let (id, seen) = h.id_with(|_, _| Err(Errno::EINVAL));
    id.set_remote_addr(peer_addr()).unwrap();
    h.checker
        .call(&id, Call::Connect, || id.connect(&h.param()))
        .unwrap();
    let conn = h.nic.last_handle();
    Harness::next_event(&seen);
    h.settle();
    assert_eq!(id.state(), None);
    assert_eq!(h.nic.handles_of(CommandKind::Release), [conn]);
    assert_eq!(
        id.listen(1),
        Err(Errno::EINVAL),
        "a destroyed id takes no call"
    );
    h.checker.assert_clean();
}

#[test]
fn failing_established_destroys_the_id() {
    let h = Harness::new();
    let checker = h.checker.clone();
    let (_listener, seen, handle) = h.listener_with(move |id, event| match event.event {
        EventKind::ConnectRequest => checker.call(id, Call::Accept, || id.accept(&accept_param())),
        _ => Err(Errno::EINVAL),
    });
    let conn = h.nic.connect_request(handle, b"");
    let (child, _) = Harness::next_event(&seen);
    let (_, established) = Harness::next_event(&seen);
    assert_eq!(established.event, EventKind::Established);
    h.settle();
    assert_eq!(child.state(), None);
    assert_eq!(h.nic.handles_of(CommandKind::Release), [conn]);
    h.nic.peer_closes(conn, false);
    h.settle();
    assert!(common::drain(&seen).is_empty());
    h.checker.assert_clean();
}

#[test]
fn failing_close_destroys_the_id_without_a_command() {
    let h = Harness::new();
    let (id, seen) = h.id_with(|_, event| match event.event {
        EventKind::Close => Err(Errno::EINVAL),
        _ => Ok(()),
    });
    id.set_remote_addr(peer_addr()).unwrap();
    h.checker
        .call(&id, Call::Connect, || id.connect(&h.param()))
        .unwrap();
    let conn = h.nic.last_handle();
    Harness::next_event(&seen);
    h.nic.peer_closes(conn, false);
    let (_, close) = Harness::next_event(&seen);
    assert_eq!(close.event, EventKind::Close);
    h.settle();
    assert_eq!(id.state(), None);
    assert!(h.nic.handles_of(CommandKind::Release).is_empty());
    h.checker.assert_clean();
}

#[test]
fn a_panicking_handler_counts_as_a_non_zero_return() {
    let h = Harness::new();
    let (_listener, seen, handle) = h.listener_with(|_, event| {
        if event.private_data == b"boom" {
            panic!("handler bug");
        }
        Ok(())
    });
    let conn = h.nic.connect_request(handle, b"boom");
    let (child, _) = Harness::next_event(&seen);
    h.settle();
    assert_eq!(child.state(), None);
    assert!(h.nic.handles_of(CommandKind::Reject).contains(&conn));
    assert_eq!(h.device.stats().handler_panics, 1);
}

#[test]
fn destroy_from_the_ids_own_handler_returns_and_nothing_follows() {
    let h = Harness::new();
    let checker = h.checker.clone();
    let (_listener, seen, handle) = h.listener_with(move |id, event| {
        match event.event {
            EventKind::ConnectRequest => {
                checker.call(id, Call::Accept, || id.accept(&accept_param()))?
            }
            EventKind::Established => checker.destroy(id.clone()),
            _ => {}
        }
        Ok(())
    });
    let conn = h.nic.connect_request(handle, b"");
    let (child, _) = Harness::next_event(&seen);
    Harness::next_event(&seen);
    h.settle();
    assert_eq!(child.state(), None);
    assert_eq!(h.nic.handles_of(CommandKind::Release), [conn]);
    h.nic.peer_closes(conn, false);
    h.settle();
    assert!(common::drain(&seen).is_empty());
    h.checker.assert_clean();
}

#[test]
fn accept_in_the_handler_waits_for_a_slow_nic_without_deadlock() {
    let h = Harness::new();
    let (_listener, seen, handle) = h.listener_with(|id, event| {
        if event.event == EventKind::ConnectRequest {
            id.accept(&accept_param())?;
        }
        Ok(())
    });
    assert_eq!(h.nic.next_command().kind, CommandKind::Listen);
    h.nic.set_answer(common::Answer::Hold);
    h.nic.connect_request(handle, b"");
    let (child, _) = Harness::next_event(&seen);
    // The handler now waits in accept, on the dispatch thread, for a NIC that holds it.
    assert_eq!(h.nic.next_command().kind, CommandKind::Accept);
    assert_eq!(child.state(), Some(IdState::ConnRecv));
    h.nic.answer_held();
    let (_, established) = Harness::next_event(&seen);
    assert_eq!(established.event, EventKind::Established);
    assert_eq!(child.state(), Some(IdState::Established));
}
