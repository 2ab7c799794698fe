//! The rules checker flags broken traces (fed by hand here; the other tests feed it real
//! ones and expect none).

use std::net::SocketAddr;

use iwnic_host_driver::rules::{Call, TraceChecker};
use iwnic_host_driver::{CmEvent, Errno, EventKind, IdKey, RtrTypes};

fn event(kind: EventKind, status: i32) -> CmEvent {
    let addr: SocketAddr = "10.0.0.1:4791".parse().unwrap();
    CmEvent {
        event: kind,
        status,
        local_addr: addr,
        remote_addr: addr,
        private_data: Vec::new(),
        ird: 0,
        ord: 0,
        rtr: RtrTypes::NONE,
    }
}

fn deliver(checker: &TraceChecker, key: IdKey, kind: EventKind, status: i32) {
    let e = event(kind, status);
    checker.handler_started(key, &e);
    checker.handler_returned(key, &e, Ok(()));
}

fn broken(violations: Vec<String>, rule: &str) {
    assert!(
        violations
            .iter()
            .any(|v| v.contains(&format!("rule {rule}"))),
        "expected a rule {rule} violation, got {violations:?}"
    );
}

#[test]
fn a_clean_active_trace_passes() {
    let c = TraceChecker::new();
    let id = IdKey(1);
    c.call_started(id, Call::Connect);
    c.call_returned(id, Call::Connect, Ok(()));
    deliver(&c, id, EventKind::ConnectReply, 0);
    deliver(&c, id, EventKind::Close, 0);
    assert!(c.finish().is_empty());
}

#[test]
fn an_event_after_a_failed_accept_breaks_rule_3() {
    let c = TraceChecker::new();
    let id = IdKey(1);
    deliver(&c, id, EventKind::ConnectRequest, 0);
    c.call_started(id, Call::Accept);
    c.call_returned(id, Call::Accept, Err(Errno::ECONNRESET));
    deliver(&c, id, EventKind::Established, 0);
    broken(c.finish(), "3");
}

/// Rule 3 is about the accept of a request: an accept refused on a connected id
/// (-EINVAL, wrong state) silences nothing.
#[test]
fn an_accept_refused_in_the_wrong_state_is_not_rule_3() {
    let c = TraceChecker::new();
    let id = IdKey(1);
    c.call_started(id, Call::Connect);
    c.call_returned(id, Call::Connect, Ok(()));
    deliver(&c, id, EventKind::ConnectReply, 0);
    c.call_started(id, Call::Accept);
    c.call_returned(id, Call::Accept, Err(Errno::EINVAL));
    c.call_started(id, Call::Disconnect);
    c.call_returned(id, Call::Disconnect, Ok(()));
    deliver(&c, id, EventKind::Close, 0);
    assert!(c.finish().is_empty());
}

#[test]
fn a_connect_without_its_reply_breaks_rule_4() {
    let c = TraceChecker::new();
    c.call_started(IdKey(1), Call::Connect);
    c.call_returned(IdKey(1), Call::Connect, Ok(()));
    broken(c.finish(), "4");
}

#[test]
fn two_replies_break_rule_4() {
    let c = TraceChecker::new();
    c.call_started(IdKey(1), Call::Connect);
    c.call_returned(IdKey(1), Call::Connect, Ok(()));
    deliver(&c, IdKey(1), EventKind::ConnectReply, -111);
    deliver(&c, IdKey(1), EventKind::ConnectReply, 0);
    broken(c.finish(), "4");
}

#[test]
fn close_before_established_breaks_rule_5() {
    let c = TraceChecker::new();
    deliver(&c, IdKey(1), EventKind::ConnectRequest, 0);
    c.call_started(IdKey(1), Call::Accept);
    c.call_returned(IdKey(1), Call::Accept, Ok(()));
    deliver(&c, IdKey(1), EventKind::Close, 0);
    broken(c.finish(), "5");
}

#[test]
fn an_event_after_close_breaks_rule_6() {
    let c = TraceChecker::new();
    c.call_started(IdKey(1), Call::Connect);
    c.call_returned(IdKey(1), Call::Connect, Ok(()));
    deliver(&c, IdKey(1), EventKind::ConnectReply, 0);
    deliver(&c, IdKey(1), EventKind::Close, 0);
    deliver(&c, IdKey(1), EventKind::Close, 0);
    broken(c.finish(), "6");
}

#[test]
fn an_event_after_a_failing_handler_breaks_rule_7() {
    let c = TraceChecker::new();
    let request = event(EventKind::ConnectRequest, 0);
    c.handler_started(IdKey(1), &request);
    c.handler_returned(IdKey(1), &request, Err(Errno::EINVAL));
    c.call_started(IdKey(1), Call::Accept);
    c.call_returned(IdKey(1), Call::Accept, Err(Errno::EINVAL));
    deliver(&c, IdKey(1), EventKind::Established, 0);
    let violations = c.finish();
    assert!(
        violations.iter().any(|v| v.contains("rule 7")),
        "{violations:?}"
    );
}

#[test]
fn a_disconnect_reaching_the_application_is_flagged() {
    let c = TraceChecker::new();
    deliver(&c, IdKey(1), EventKind::Disconnect, 0);
    assert!(c.finish().iter().any(|v| v.contains("DISCONNECT")));
}

#[test]
fn overlapping_handlers_break_rule_1() {
    let c = TraceChecker::new();
    let e = event(EventKind::ConnectRequest, 0);
    c.handler_started(IdKey(1), &e);
    c.handler_started(IdKey(2), &e);
    broken(c.finish(), "1");
}

#[test]
fn a_handler_on_a_thread_inside_an_api_call_breaks_rule_1() {
    let c = TraceChecker::new();
    c.call_started(IdKey(1), Call::Accept);
    deliver(&c, IdKey(1), EventKind::Established, 0);
    broken(c.finish(), "1");
}

#[test]
fn statuses_outside_the_contracts_lists_are_flagged() {
    let c = TraceChecker::new();
    c.call_started(IdKey(1), Call::Connect);
    c.call_returned(IdKey(1), Call::Connect, Ok(()));
    deliver(&c, IdKey(1), EventKind::ConnectReply, -12);
    assert!(c.finish().iter().any(|v| v.contains("status")));
}
