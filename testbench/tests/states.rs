//! The misuse matrix on the real system: every API call in every id state returns the
//! contract's value (spec/iwcm.md "Return values"), with ids staged in each state by two
//! simulated NICs instead of a scripted one. Each cell gets a fresh pair, so a cell's
//! consequences (a connect that went out, a reject the peer saw) cannot leak into the
//! next; every cell's trace goes through the rules checker (tests/common).

mod common;

use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};

use common::{addr, param, wait_until, Pair, React, TracedId, PATIENCE, PORT};
use iwnic_host_driver::cm::{
    IB_ACCESS_REMOTE_READ, IB_ACCESS_REMOTE_WRITE, IB_QP_ACCESS_FLAGS, IB_QP_STATE,
};
use iwnic_host_driver::{Errno, EventKind, IdState, QpAttrUpdate, QpState};
use iwnic_proto::errno::ECONNREFUSED;
use iwnic_testbench::sim::A_IP;

#[derive(Debug, Clone, Copy)]
enum Call {
    Listen,
    Connect,
    Accept,
    Reject,
    Disconnect,
    InitQpAttr(QpState),
}

/// The matrix's columns.
const CALLS: [Call; 9] = [
    Call::Listen,
    Call::Connect,
    Call::Accept,
    Call::Reject,
    Call::Disconnect,
    Call::InitQpAttr(QpState::Init),
    Call::InitQpAttr(QpState::Rtr),
    Call::InitQpAttr(QpState::Rts),
    Call::InitQpAttr(QpState::Reset),
];

const OK: Result<(), Errno> = Ok(());
const EINVAL: Result<(), Errno> = Err(Errno::EINVAL);

/// A port on A that no test listens on or connects to otherwise.
const A_PORT: u16 = 5000;

/// Make `call` on `id`; init_qp_attr's answer is checked against the contract here, so
/// the matrix only holds whether it succeeded.
fn make(id: &TracedId, call: Call) -> Result<(), Errno> {
    match call {
        Call::Listen => id.listen(4),
        Call::Connect => id.connect(&param(b"")),
        Call::Accept => id.accept(&param(b"")),
        Call::Reject => id.reject(b"no"),
        Call::Disconnect => id.disconnect(false),
        Call::InitQpAttr(qp_state) => id.init_qp_attr(qp_state).map(|update| {
            let expected = match qp_state {
                QpState::Init | QpState::Rtr => QpAttrUpdate {
                    mask: IB_QP_STATE | IB_QP_ACCESS_FLAGS,
                    qp_access_flags: IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ,
                },
                _ => QpAttrUpdate {
                    mask: 0,
                    qp_access_flags: 0,
                },
            };
            assert_eq!(update, expected, "init_qp_attr({qp_state:?})");
        }),
    }
}

/// Stage an id in `state` on a fresh pair, make `call` on it while its host's dispatch is
/// held (so no event moves it), and return what the call returned.
fn cell(state: IdState, call: Call) -> Result<(), Errno> {
    let p = Pair::new();
    // (the id, its host is A, ids to destroy afterwards)
    let (id, on_a, others) = match state {
        IdState::Idle => {
            let id = p.a.id(common::report_only());
            id.set_local_addr(addr(A_IP, A_PORT)).unwrap();
            id.set_remote_addr(p.b_addr()).unwrap();
            (id, true, vec![p.b.sitting_listener(PORT, 8)])
        }
        IdState::Listen => (p.a.sitting_listener(A_PORT, 8), true, vec![]),
        IdState::ConnRecv | IdState::ConnSent => {
            let listener = p.b.sitting_listener(PORT, 8);
            let a_id = p.connect(b"");
            let (child, _) = p.b.expect(EventKind::ConnectRequest, 0);
            if state == IdState::ConnRecv {
                (child, false, vec![a_id, listener])
            } else {
                (a_id, true, vec![child, listener])
            }
        }
        IdState::Established | IdState::Closing => {
            let listener = p.b.accepting_listener(PORT, b"");
            let a_id = p.connect(b"");
            p.a.expect(EventKind::ConnectReply, 0);
            (a_id, true, vec![listener])
        }
        IdState::Destroying => unreachable!("staged by its own test"),
    };
    let hold = if on_a {
        p.a.hold_dispatch(&p.b)
    } else {
        p.b.hold_dispatch(&p.a)
    };
    if state == IdState::Closing {
        id.disconnect(false).unwrap();
    }
    assert_eq!(id.state(), Some(state));
    let result = make(&id, call);
    // Destroyed before the hold ends, so the events the call queued are dropped (rule 8)
    // and the trace ends at the call. The rules checker takes any failed accept or connect
    // for rule 3's, even one refused for the id's state, and would flag what follows.
    id.destroy();
    hold.release();
    for other in others {
        other.destroy();
    }
    p.stop();
    result
}

fn row(state: IdState, expected: [Result<(), Errno>; 9]) {
    for (call, want) in CALLS.into_iter().zip(expected) {
        assert_eq!(cell(state, call), want, "{call:?} in {state:?}");
    }
}

// Columns: listen, connect, accept, reject, disconnect, init_qp_attr INIT, RTR, RTS, RESET.

#[test]
fn calls_in_idle() {
    // disconnect is a no-op in IDLE.
    row(
        IdState::Idle,
        [OK, OK, EINVAL, EINVAL, OK, OK, OK, OK, EINVAL],
    );
}

#[test]
fn calls_in_listen() {
    // disconnect is -EINVAL in LISTEN, the one state it is.
    row(IdState::Listen, [EINVAL; 9]);
}

#[test]
fn calls_in_conn_recv() {
    row(
        IdState::ConnRecv,
        [EINVAL, EINVAL, OK, OK, OK, OK, OK, OK, EINVAL],
    );
}

#[test]
fn calls_in_conn_sent() {
    // disconnect gives the attempt up; its CONNECT_REPLY reports it.
    row(
        IdState::ConnSent,
        [EINVAL, EINVAL, EINVAL, EINVAL, OK, OK, OK, OK, EINVAL],
    );
}

#[test]
fn calls_in_established() {
    row(
        IdState::Established,
        [EINVAL, EINVAL, EINVAL, EINVAL, OK, OK, OK, OK, EINVAL],
    );
}

#[test]
fn calls_in_closing() {
    // disconnect again is a no-op; init_qp_attr is not legal in CLOSING.
    row(
        IdState::Closing,
        [
            EINVAL, EINVAL, EINVAL, EINVAL, OK, EINVAL, EINVAL, EINVAL, EINVAL,
        ],
    );
}

#[test]
fn calls_while_destroying() {
    let p = Pair::new();
    // The child's handler blocks until the test has made its calls, so the destroy started
    // on another thread waits in DESTROYING (rule 8: it returns only when no handler runs).
    let (child_tx, child_rx) = channel();
    let (release, released) = channel::<()>();
    let released = Mutex::new(released);
    let on_request: React = Arc::new(move |child, event| {
        if event.event == EventKind::ConnectRequest {
            child_tx.send(child.clone()).unwrap();
            let _ = released.lock().unwrap().recv_timeout(PATIENCE);
        }
        Ok(())
    });
    let listener = p.b.listener(PORT, 8, on_request);
    p.connect(b"");
    let child: TracedId = child_rx.recv_timeout(PATIENCE).unwrap();
    let destroyer = {
        let child = child.clone();
        std::thread::spawn(move || child.destroy())
    };
    wait_until("the child DESTROYING", || {
        child.state() == Some(IdState::Destroying)
    });
    for call in CALLS {
        let want = match call {
            Call::Disconnect => OK,
            _ => EINVAL,
        };
        assert_eq!(make(&child, call), want, "{call:?} while DESTROYING");
    }
    assert!(
        !destroyer.is_finished(),
        "destroy returned while the handler runs"
    );
    release.send(()).unwrap();
    destroyer.join().unwrap();
    assert_eq!(child.state(), None);
    // Destroying the unanswered child rejected it.
    p.a.expect(EventKind::ConnectReply, -ECONNREFUSED);
    listener.destroy();
    p.stop();
}
