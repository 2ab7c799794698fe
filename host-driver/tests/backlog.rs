//! Rule 10: the NIC's backlog bounds requests not yet delivered to the application. The
//! driver tells the NIC (`Delivered`) when a CONNECT_REQUEST handler has returned without
//! answering the request; one answered in its handler needs no word.

mod common;

use common::Harness;
use iwnic_host_driver::rules::Call;
use iwnic_host_driver::{Errno, EventKind};
use iwnic_proto::host::CommandKind;

#[test]
fn a_request_left_unanswered_by_its_handler_is_reported_delivered() {
    let h = Harness::new();
    let (_listener, seen, handle) = h.listener_with(|_, _| Ok(()));
    let conn = h.nic.connect_request(handle, b"");
    let (child, _) = Harness::next_event(&seen);
    h.nic.wait_delivered(conn);
    // Still the application's to answer.
    h.checker
        .call(&child, Call::Accept, || child.accept(&h.param()))
        .unwrap();
    h.settle();
    assert_eq!(
        h.nic.kinds_on(conn),
        [CommandKind::Delivered, CommandKind::Accept]
    );
    h.checker.assert_clean();
}

#[test]
fn a_request_answered_in_its_handler_is_not_reported() {
    let h = Harness::new();
    let (checker, param) = (h.checker.clone(), h.param());
    let (_listener, seen, handle) = h.listener_with(move |id, event| {
        match (event.event, event.private_data.as_slice()) {
            (EventKind::ConnectRequest, b"accept") => {
                checker.call(id, Call::Accept, || id.accept(&param))
            }
            (EventKind::ConnectRequest, b"reject") => {
                checker.call(id, Call::Reject, || id.reject(b""))
            }
            // Rule 7: the driver rejects it.
            (EventKind::ConnectRequest, _) => Err(Errno::ECONNREFUSED),
            _ => Ok(()),
        }
    });
    for (private_data, answer) in [
        (&b"accept"[..], CommandKind::Accept),
        (b"reject", CommandKind::Reject),
        (b"fail", CommandKind::Reject),
    ] {
        let conn = h.nic.connect_request(handle, private_data);
        Harness::next_event(&seen);
        h.settle();
        assert_eq!(h.nic.kinds_on(conn), [answer], "{private_data:?}");
    }
    h.checker.assert_clean();
}
