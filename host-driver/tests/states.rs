//! Every call in every id state returns the contract's value (the misuse matrix of
//! spec/iwcm.md "Return values"), and destroy does the contract's teardown in every state.

mod common;

use std::sync::mpsc::{channel, Receiver};
use std::sync::Mutex;
use std::time::Instant;

use common::{drain, local_addr, peer_addr, Answer, Harness, Seen, PATIENCE, PORT, QPN};
use iwnic_host_driver::errno::ECONNRESET;
use iwnic_host_driver::rules::{self, TraceEntry};
use iwnic_host_driver::{
    CmId, ConnParam, DeviceConfig, DriverStats, Errno, EventKind, IdState, QpState,
};
use iwnic_proto::host::CommandKind;

/// Wait for the dispatch thread to bring `id` to `state`.
fn wait_for_state(id: &CmId, state: IdState) {
    let start = Instant::now();
    while id.state() != Some(state) {
        assert!(start.elapsed() < PATIENCE, "{id:?} never reached {state:?}");
        std::thread::yield_now();
    }
}

/// A fresh id in `state` (not DESTROYING), with its addresses set where IDLE needs
/// them; the NIC handle its teardown names.
fn id_in(h: &Harness, state: IdState) -> (CmId, u32) {
    let connected = |auto_reply: Option<i32>| {
        h.nic.set_auto_connect_reply(auto_reply);
        let (id, seen) = h.id();
        id.set_remote_addr(peer_addr()).unwrap();
        id.connect(&h.param()).unwrap();
        let conn = h.nic.last_handle();
        if auto_reply.is_some() {
            Harness::next_event(&seen);
        }
        (id, conn)
    };
    match state {
        IdState::Idle => {
            let (id, _) = h.id();
            id.set_local_addr(local_addr(PORT)).unwrap();
            id.set_remote_addr(peer_addr()).unwrap();
            (id, 0)
        }
        IdState::Listen => {
            let (id, _, handle) = h.listener_with(|_, _| Ok(()));
            (id, handle)
        }
        IdState::ConnRecv => {
            let (_listener, seen, handle) = h.listener_with(|_, _| Ok(()));
            let conn = h.nic.connect_request(handle, b"");
            let id = Harness::next_event(&seen).0;
            h.nic.wait_delivered(conn);
            (id, conn)
        }
        IdState::ConnSent => connected(None),
        IdState::Established => connected(Some(0)),
        IdState::Closing => {
            let (id, conn) = connected(Some(0));
            h.nic.peer_fin(conn);
            wait_for_state(&id, IdState::Closing);
            (id, conn)
        }
        IdState::Destroying => unreachable!("staged by its own test"),
    }
}

#[derive(Debug, Clone, Copy)]
enum Call {
    Listen,
    Connect,
    Accept,
    Reject,
    Disconnect,
    InitQp(QpState),
}

const CALLS: [Call; 8] = [
    Call::Listen,
    Call::Connect,
    Call::Accept,
    Call::Reject,
    Call::Disconnect,
    Call::InitQp(QpState::Init),
    Call::InitQp(QpState::Rts),
    Call::InitQp(QpState::Reset),
];

fn make(id: &CmId, call: Call) -> Result<(), Errno> {
    let param = ConnParam {
        qpn: QPN,
        ird: 1,
        ord: 1,
        ..ConnParam::default()
    };
    match call {
        Call::Listen => id.listen(4),
        Call::Connect => id.connect(&param),
        Call::Accept => id.accept(&param),
        Call::Reject => id.reject(b"no"),
        Call::Disconnect => id.disconnect(false),
        Call::InitQp(state) => id.init_qp_attr(state).map(drop),
    }
}

const OK: Result<(), Errno> = Ok(());
const EINVAL: Result<(), Errno> = Err(Errno::EINVAL);

#[test]
fn every_call_in_every_state_returns_the_contracts_value() {
    // Columns: listen, connect, accept, reject, disconnect, init_qp INIT, RTS, RESET.
    let table: [(IdState, [Result<(), Errno>; 8]); 6] = [
        (IdState::Idle, [OK, OK, EINVAL, EINVAL, OK, OK, OK, EINVAL]),
        (IdState::Listen, [EINVAL; 8]),
        (
            IdState::ConnRecv,
            [EINVAL, EINVAL, OK, OK, OK, OK, OK, EINVAL],
        ),
        (
            IdState::ConnSent,
            [EINVAL, EINVAL, EINVAL, EINVAL, OK, OK, OK, EINVAL],
        ),
        (
            IdState::Established,
            [EINVAL, EINVAL, EINVAL, EINVAL, OK, OK, OK, EINVAL],
        ),
        (
            IdState::Closing,
            [EINVAL, EINVAL, EINVAL, EINVAL, OK, EINVAL, EINVAL, EINVAL],
        ),
    ];
    let h = Harness::new();
    for (state, expected) in table {
        for (call, want) in CALLS.into_iter().zip(expected) {
            let (id, _) = id_in(&h, state);
            assert_eq!(id.state(), Some(state));
            assert_eq!(make(&id, call), want, "{call:?} in {state:?}");
        }
    }
    assert_eq!(h.device.stats(), Default::default());
}

#[test]
fn calls_on_a_destroyed_id_return_einval() {
    let h = Harness::new();
    let (id, _) = id_in(&h, IdState::Idle);
    let clone = id.clone();
    id.destroy();
    for call in CALLS {
        assert_eq!(make(&clone, call), EINVAL, "{call:?}");
    }
    assert_eq!(clone.set_local_addr(local_addr(PORT)), EINVAL);
    clone.destroy(); // a second destroy does nothing
}

#[test]
fn connect_after_a_failed_connect_is_einval() {
    let h = Harness::new();
    let (id, _) = id_in(&h, IdState::Idle);
    let too_big = ConnParam {
        qpn: QPN,
        ird: 1000,
        ..ConnParam::default()
    };
    assert_eq!(id.connect(&too_big), EINVAL, "the NIC refuses IRD 1000");
    assert_eq!(id.state(), Some(IdState::Idle));
    assert_eq!(
        make(&id, Call::Connect),
        EINVAL,
        "stricter: no retry on the id"
    );
    assert_eq!(make(&id, Call::Listen), OK, "listen is still legal in IDLE");
}

/// An id carries one connection: after its CLOSE (its last event, rule 6) it is IDLE
/// and connect is refused (**stricter** than the kernel, which lets it connect again).
#[test]
fn connect_after_a_closed_connection_is_einval() {
    let h = Harness::new();
    let (id, conn) = id_in(&h, IdState::Established);
    h.nic.peer_closes(conn, false);
    wait_for_state(&id, IdState::Idle);
    assert_eq!(make(&id, Call::Connect), EINVAL);
    assert_eq!(id.state(), Some(IdState::Idle));
}

#[test]
fn set_addresses_only_in_idle() {
    let h = Harness::new();
    let (id, _) = id_in(&h, IdState::Listen);
    assert_eq!(id.set_local_addr(local_addr(1)), EINVAL);
    assert_eq!(id.set_remote_addr(peer_addr()), EINVAL);
}

#[test]
fn destroy_in_every_state_tears_down_what_the_contract_says() {
    let h = Harness::new();
    let cases = [
        (IdState::Idle, None),
        (IdState::Listen, Some(CommandKind::Unlisten)),
        (IdState::ConnRecv, Some(CommandKind::Reject)),
        (IdState::ConnSent, Some(CommandKind::Release)),
        (IdState::Established, Some(CommandKind::Release)),
        (IdState::Closing, Some(CommandKind::Release)),
    ];
    for (state, teardown) in cases {
        let (id, handle) = id_in(&h, state);
        let before = h.nic.received().len();
        let probe = id.clone();
        id.destroy();
        assert_eq!(probe.state(), None, "{state:?}");
        let sent: Vec<_> = h.nic.received()[before..]
            .iter()
            .map(|c| (c.kind, c.handle))
            .collect();
        assert_eq!(
            sent,
            teardown
                .map(|kind| (kind, handle))
                .into_iter()
                .collect::<Vec<_>>(),
            "{state:?}"
        );
    }
    assert_eq!(
        h.device.id_count(),
        1,
        "only the listener that staged the CONN_RECV id remains"
    );
}

#[test]
fn an_id_being_destroyed_refuses_every_call_but_disconnect() {
    let h = Harness::new();
    let (to_test, from_handler) = channel();
    let (release_tx, release_rx) = channel::<()>();
    let (to_test, release_rx) = (Mutex::new(to_test), Mutex::new(release_rx));
    let (_listener, _seen, handle) = h.listener_with(move |id, _| {
        to_test.lock().unwrap().send(id.clone()).unwrap();
        // Block the handler until the test has looked at the DESTROYING id.
        let _ = release_rx.lock().unwrap().recv_timeout(PATIENCE);
        Ok(())
    });
    h.nic.connect_request(handle, b"");
    let child: CmId = from_handler.recv_timeout(PATIENCE).unwrap();
    let destroyer = {
        let child = child.clone();
        std::thread::spawn(move || child.destroy())
    };
    // destroy marks the id and then waits for the handler that is running for it.
    wait_for_state(&child, IdState::Destroying);
    for call in CALLS {
        let want = match call {
            Call::Disconnect => OK,
            _ => EINVAL,
        };
        assert_eq!(make(&child, call), want, "{call:?} while DESTROYING");
    }
    // The handler is still blocked, so destroy cannot have returned (rule 8).
    assert!(
        !destroyer.is_finished(),
        "destroy returned while the handler runs"
    );
    release_tx.send(()).unwrap();
    destroyer.join().unwrap();
    assert_eq!(child.state(), None);
}

#[test]
fn destroy_waits_for_an_accept_in_flight_then_aborts_the_connection() {
    let h = Harness::new();
    let (_listener, seen, handle) = h.listener_with(|_, _| Ok(()));
    let conn = h.nic.connect_request(handle, b"");
    let (child, _) = Harness::next_event(&seen);
    h.nic.set_answer(Answer::Hold);
    let acceptor = {
        let child = child.clone();
        std::thread::spawn(move || {
            child.accept(&ConnParam {
                qpn: QPN,
                ..ConnParam::default()
            })
        })
    };
    while !h
        .nic
        .received()
        .iter()
        .any(|c| c.kind == CommandKind::Accept)
    {
        std::thread::yield_now();
    }
    let destroyer = {
        let child = child.clone();
        std::thread::spawn(move || child.destroy())
    };
    h.nic.answer_held();
    assert_eq!(acceptor.join().unwrap(), OK);
    destroyer.join().unwrap();
    let after_accept: Vec<_> = h
        .nic
        .received()
        .into_iter()
        .skip_while(|c| c.kind != CommandKind::Accept)
        .map(|c| (c.kind, c.handle))
        .collect();
    assert_eq!(
        after_accept,
        [(CommandKind::Accept, conn), (CommandKind::Release, conn)]
    );
    assert_eq!(child.state(), None);
}

/// An accepted child whose ESTABLISHED waits behind a handler holding the dispatch
/// thread until the returned gate is opened (or dropped); its connection handle.
fn accepted_behind_a_busy_dispatcher(h: &Harness) -> (CmId, u32, std::sync::mpsc::Sender<()>) {
    let (child_tx, child_rx) = channel();
    let child_tx = Mutex::new(child_tx);
    let (_listener, _, handle) = h.listener_with(move |id, event| {
        // Only the request: nobody listens on `child_rx` for later events, and a failed
        // send's panic would destroy the id under the test (rule 7).
        if event.event == EventKind::ConnectRequest {
            child_tx.lock().unwrap().send(id.clone()).unwrap();
        }
        Ok(())
    });
    let (entered_tx, entered_rx) = channel();
    let (gate_tx, gate_rx) = channel::<()>();
    let gate = Mutex::new((entered_tx, gate_rx));
    let (_busy, _, busy_handle) = h.listener_with(move |_, _| {
        let gate = gate.lock().unwrap();
        gate.0.send(()).unwrap();
        let _ = gate.1.recv();
        Ok(())
    });
    let conn = h.nic.connect_request(handle, b"");
    let child = child_rx.recv_timeout(PATIENCE).unwrap();
    h.nic.connect_request(busy_handle, b"");
    entered_rx.recv_timeout(PATIENCE).unwrap();
    let param = ConnParam {
        qpn: QPN,
        ..ConnParam::default()
    };
    assert_eq!(child.accept(&param), OK);
    (child, conn, gate_tx)
}

/// A disconnect after accept returned but before its ESTABLISHED was dispatched waits
/// for it (the kernel's connect wait), then closes the established connection: it does
/// not find the id still CONN_RECV and return 0 having done nothing.
#[test]
fn disconnect_after_accept_waits_for_established_then_closes() {
    let h = Harness::new();
    let (child, conn, gate) = accepted_behind_a_busy_dispatcher(&h);
    let disconnecter = {
        let child = child.clone();
        std::thread::spawn(move || child.disconnect(false))
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(
        !disconnecter.is_finished(),
        "disconnect waits for ESTABLISHED"
    );
    gate.send(()).unwrap();
    assert_eq!(disconnecter.join().unwrap(), OK);
    assert_eq!(h.nic.handles_of(CommandKind::Disconnect), [conn]);
    assert_ne!(child.state(), Some(IdState::ConnRecv));
    h.settle();
    assert_eq!(h.device.stats(), DriverStats::default());
}

/// The wait for ESTABLISHED is bounded as a command's answer is: if it does not come,
/// disconnect says so (-ETIMEDOUT) having sent nothing.
#[test]
fn disconnect_gives_up_waiting_for_established_after_the_command_timeout() {
    let h = Harness::with_config(DeviceConfig {
        command_timeout: std::time::Duration::from_millis(500),
        ..DeviceConfig::default()
    });
    let (child, _, gate) = accepted_behind_a_busy_dispatcher(&h);
    assert_eq!(child.disconnect(false), Err(Errno::ETIMEDOUT));
    assert!(h.nic.handles_of(CommandKind::Disconnect).is_empty());
    drop(gate);
}

/// A listener whose CONNECT_REQUEST handler accepts and then, still holding the dispatch
/// thread that must deliver the ESTABLISHED, disconnects once for each of `asks` (abrupt
/// or not, in order) and returns `request_outcome`. Returns the connection's handle, what
/// the handlers saw, and each handler's event with the id's state as the handler started.
fn accepting_then_disconnecting(
    h: &Harness,
    asks: &'static [bool],
    request_outcome: Result<(), Errno>,
) -> (u32, Seen, Receiver<(EventKind, Option<IdState>)>) {
    let (states_tx, states) = channel();
    let states_tx = Mutex::new(states_tx);
    let checker = h.checker.clone();
    let param = h.param();
    let (_listener, seen, handle) = h.listener_with(move |id, event| {
        let _ = states_tx.lock().unwrap().send((event.event, id.state()));
        if event.event != EventKind::ConnectRequest {
            return Ok(());
        }
        checker.call(id, rules::Call::Accept, || id.accept(&param))?;
        for &abrupt in asks {
            // Its return is in the trace, which the tests compare.
            let _ = checker.call(id, rules::Call::Disconnect, || id.disconnect(abrupt));
        }
        request_outcome
    });
    let conn = h.nic.connect_request(handle, b"");
    (conn, seen, states)
}

/// The statuses the disconnect calls in `id`'s trace returned, in order.
fn disconnect_returns(h: &Harness, id: &CmId) -> Vec<i32> {
    h.checker
        .trace(id.key())
        .into_iter()
        .filter_map(|entry| match entry {
            TraceEntry::CallReturned {
                call: rules::Call::Disconnect,
                status,
            } => Some(status),
            _ => None,
        })
        .collect()
}

/// The events handlers saw once everything queued so far was dispatched, as (event,
/// status). Call it after the ESTABLISHED was seen: whatever that ESTABLISHED set off on
/// the NIC was queued before its handler started.
fn events_after_settling(h: &Harness, seen: &Seen) -> Vec<(EventKind, i32)> {
    h.settle();
    drain(seen)
        .into_iter()
        .map(|(_, event)| (event.event, event.status))
        .collect()
}

/// On the dispatch thread a disconnect between accept and its ESTABLISHED cannot wait
/// for the ESTABLISHED (that thread delivers it): it returns 0 and is sent when the
/// ESTABLISHED is dispatched, before its handler runs, which finds the id CLOSING; the
/// CLOSE follows, last and once.
#[test]
fn disconnect_on_the_dispatch_thread_after_accept_is_sent_with_established() {
    let h = Harness::new();
    let (conn, seen, states) = accepting_then_disconnecting(&h, &[false], Ok(()));
    let (child, _) = Harness::next_event(&seen);
    assert_eq!(Harness::next_event(&seen).1.event, EventKind::Established);
    assert_eq!(events_after_settling(&h, &seen), [(EventKind::Close, 0)]);
    assert_eq!(
        states.try_iter().collect::<Vec<_>>(),
        [
            (EventKind::ConnectRequest, Some(IdState::ConnRecv)),
            (EventKind::Established, Some(IdState::Closing)),
            (EventKind::Close, Some(IdState::Idle)),
        ]
    );
    assert_eq!(
        h.nic.commands_on(conn),
        [
            (CommandKind::Accept, false),
            (CommandKind::Disconnect, false)
        ]
    );
    let handled = |event| {
        [
            TraceEntry::HandlerStarted { event, status: 0 },
            TraceEntry::HandlerReturned { event, status: 0 },
        ]
    };
    let [request_started, request_returned] = handled(EventKind::ConnectRequest);
    let mut expected = vec![
        request_started,
        TraceEntry::CallStarted(rules::Call::Accept),
        TraceEntry::CallReturned {
            call: rules::Call::Accept,
            status: 0,
        },
        TraceEntry::CallStarted(rules::Call::Disconnect),
        TraceEntry::CallReturned {
            call: rules::Call::Disconnect,
            status: 0,
        },
        request_returned,
    ];
    expected.extend(handled(EventKind::Established));
    expected.extend(handled(EventKind::Close));
    assert_eq!(h.checker.trace(child.key()), expected);
    h.checker.assert_clean();
    assert_eq!(h.device.stats(), DriverStats::default());
}

/// Asked for twice before the ESTABLISHED, gracefully and abruptly in either order, the
/// deferred disconnect is sent once, abrupt.
#[test]
fn an_abrupt_disconnect_wins_over_a_graceful_one_while_deferred() {
    for asks in [&[false, true][..], &[true, false]] {
        let h = Harness::new();
        let (conn, seen, _) = accepting_then_disconnecting(&h, asks, Ok(()));
        let (child, _) = Harness::next_event(&seen);
        assert_eq!(Harness::next_event(&seen).1.event, EventKind::Established);
        assert_eq!(
            events_after_settling(&h, &seen),
            [(EventKind::Close, -ECONNRESET)],
            "{asks:?}"
        );
        assert_eq!(
            h.nic.commands_on(conn),
            [
                (CommandKind::Accept, false),
                (CommandKind::Disconnect, true)
            ],
            "{asks:?}"
        );
        assert_eq!(disconnect_returns(&h, &child), [0, 0], "{asks:?}");
        h.checker.assert_clean();
    }
}

/// A deferred disconnect dies with its id: destroyed before its ESTABLISHED (here by the
/// request handler's non-zero return, rule 7), the connection is released, no disconnect
/// is ever sent and the ESTABLISHED is dropped.
#[test]
fn a_deferred_disconnect_is_dropped_when_the_id_is_destroyed_first() {
    let h = Harness::new();
    let (conn, seen, _) = accepting_then_disconnecting(&h, &[true], Err(Errno::EINVAL));
    let (child, _) = Harness::next_event(&seen);
    assert!(events_after_settling(&h, &seen).is_empty());
    assert_eq!(child.state(), None);
    assert_eq!(disconnect_returns(&h, &child), [0]);
    assert_eq!(
        h.nic.commands_on(conn),
        [(CommandKind::Accept, false), (CommandKind::Release, false)]
    );
    assert_eq!(
        h.device.stats(),
        DriverStats {
            events_for_forgotten_connections: 1,
            ..DriverStats::default()
        }
    );
    h.checker.assert_clean();
}

#[test]
fn a_request_queued_behind_its_listeners_destruction_is_rejected() {
    let h = Harness::new();
    // Hold the dispatch thread in another id's handler while the request queues up.
    let (blocked_tx, blocked_rx) = channel();
    let (go_tx, go_rx) = channel::<()>();
    let (blocked_tx, go_rx) = (Mutex::new(blocked_tx), Mutex::new(go_rx));
    let (blocker, _) = h.id_with(move |_, _| {
        blocked_tx.lock().unwrap().send(()).unwrap();
        let _ = go_rx.lock().unwrap().recv_timeout(PATIENCE);
        Ok(())
    });
    blocker.set_remote_addr(peer_addr()).unwrap();
    blocker.connect(&h.param()).unwrap();
    blocked_rx.recv_timeout(PATIENCE).unwrap();

    let (listener, seen, handle) = h.listener_with(|_, _| Ok(()));
    let conn = h.nic.connect_request(handle, b"");
    listener.destroy();
    go_tx.send(()).unwrap();
    h.settle();
    assert!(
        common::drain(&seen).is_empty(),
        "no handler for a destroyed listener"
    );
    assert!(h.nic.handles_of(CommandKind::Reject).contains(&conn));
}
