//! Fixtures of the end-to-end tests: two simulated NICs (the behavioural datapath with the
//! real firmware), a host driver on each, the link between them.
//!
//! The contract's rules checker is not optional here. Ids exist only as [`TracedId`]s,
//! created by a [`Host`] with a handler wrapped by its [`TraceChecker`], and every API call
//! on them goes through that checker. When a [`Host`] goes away (normally through
//! [`Pair::stop`]) its trace must be clean and its driver must have seen no protocol
//! anomaly; otherwise the test fails there.
#![allow(dead_code)] // each test binary uses its own part of the fixture

use std::net::SocketAddr;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use iwnic_firmware::Config;
use iwnic_host_driver::rules::{Call, TraceChecker};
use iwnic_host_driver::{
    CmEvent, CmId, ConnParam, Device, DeviceConfig, DriverStats, Errno, EventKind, IdState,
    InProcessTransport, QpAttrUpdate, QpState, Transport, TransportError,
};
use iwnic_proto::host::Record;
use iwnic_testbench::sim::{Side, Sim, SimConfig, SimReport, A_IP, B_IP};

/// The port B's tests listen on.
pub const PORT: u16 = 4791;
/// The port of the listener a [`DispatchHold`] parks a handler on.
const GATE_PORT: u16 = 4790;
/// The QP number both hosts register and every accept and connect names.
pub const QPN: u32 = 1;
/// Bounds every wait for the simulation or the drivers, so a broken system fails the test
/// instead of hanging it. No test depends on its value.
pub const PATIENCE: Duration = Duration::from_secs(20);
/// How long a test watches for an event that must not come. Long enough for the
/// simulated link (microseconds) and the drivers' threads; a shorter value can only hide a
/// stray event, never fail a correct run.
pub const QUIET: Duration = Duration::from_millis(200);

pub fn addr(ip: [u8; 4], port: u16) -> SocketAddr {
    SocketAddr::from((ip, port))
}

/// Firmware timers short enough for tests: a SYN to nowhere gives up after ~150 ms, an
/// unanswered MPA request after 500 ms, TIME_WAIT lasts 100 ms.
pub fn quick_firmware() -> Config {
    use smoltcp::time::Duration as D;
    // Short enough for quick tests, long enough that a simulation thread stalled by a
    // loaded machine (the model runs at wall-clock pace) does not make timers fire early
    // enough to change an outcome.
    Config {
        rto_initial: D::from_millis(50),
        rto_min: D::from_millis(50),
        syn_retries: 3,
        data_retries: 6,
        mpa_request_timeout: D::from_millis(1000),
        mpa_reply_timeout: D::from_millis(1000),
        time_wait: D::from_millis(200),
        fin_wait_2_timeout: D::from_millis(1000),
        ..Config::default()
    }
}

/// The initiator's IRD and ORD in [`param`]: distinct, so rule 9's swaps show.
pub const IRD: u32 = 4;
pub const ORD: u32 = 3;

/// Accept's or connect's parameters with `private_data`.
pub fn param(private_data: &[u8]) -> ConnParam {
    ConnParam {
        private_data: private_data.to_vec(),
        ird: IRD,
        ord: ORD,
        qpn: QPN,
    }
}

/// Wait until `done` holds (the drivers' threads make it so), or fail naming `what`.
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < PATIENCE, "waited in vain for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// An id whose every API call is recorded by its host's rules checker.
#[derive(Clone)]
pub struct TracedId {
    id: CmId,
    checker: TraceChecker,
}

impl std::fmt::Debug for TracedId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.id.fmt(f)
    }
}

impl PartialEq for TracedId {
    fn eq(&self, other: &TracedId) -> bool {
        self.id == other.id
    }
}

impl TracedId {
    pub fn listen(&self, backlog: u32) -> Result<(), Errno> {
        self.checker
            .call(&self.id, Call::Listen, || self.id.listen(backlog))
    }

    pub fn connect(&self, param: &ConnParam) -> Result<(), Errno> {
        self.checker
            .call(&self.id, Call::Connect, || self.id.connect(param))
    }

    pub fn accept(&self, param: &ConnParam) -> Result<(), Errno> {
        self.checker
            .call(&self.id, Call::Accept, || self.id.accept(param))
    }

    pub fn reject(&self, private_data: &[u8]) -> Result<(), Errno> {
        self.checker
            .call(&self.id, Call::Reject, || self.id.reject(private_data))
    }

    pub fn disconnect(&self, abrupt: bool) -> Result<(), Errno> {
        self.checker
            .call(&self.id, Call::Disconnect, || self.id.disconnect(abrupt))
    }

    pub fn init_qp_attr(&self, qp_state: QpState) -> Result<QpAttrUpdate, Errno> {
        self.checker.call(&self.id, Call::InitQpAttr, || {
            self.id.init_qp_attr(qp_state)
        })
    }

    pub fn destroy(self) {
        self.checker.destroy(self.id);
    }

    pub fn state(&self) -> Option<IdState> {
        self.id.state()
    }

    pub fn connection_index(&self) -> Option<u16> {
        self.id.connection_index()
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.id.local_addr()
    }

    pub fn set_local_addr(&self, addr: SocketAddr) -> Result<(), Errno> {
        self.id.set_local_addr(addr)
    }

    pub fn set_remote_addr(&self, addr: SocketAddr) -> Result<(), Errno> {
        self.id.set_remote_addr(addr)
    }
}

/// What a handler does besides reporting its event: its return value asks the driver to
/// destroy the id when non-zero (rule 7).
pub type React = Arc<dyn Fn(&TracedId, &CmEvent) -> Result<(), Errno> + Send + Sync>;

/// A handler that only reports.
pub fn report_only() -> React {
    Arc::new(|_, _| Ok(()))
}

/// An event record as the driver's receive thread got it from the NIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TappedEvent {
    pub kind: EventKind,
    pub status: i32,
    /// The event's local port (for a CONNECT_REQUEST: the listener's).
    pub local_port: u16,
}

/// The event records a driver has received from its NIC, whether or not they were
/// dispatched yet: what a test waits on to know the NIC's side of a race is done.
#[derive(Default)]
struct RecordTap {
    events: Mutex<Vec<TappedEvent>>,
    grew: Condvar,
}

/// The in-process transport with a [`RecordTap`] on what the driver receives.
struct TappedTransport {
    inner: InProcessTransport,
    tap: Arc<RecordTap>,
}

impl Transport for TappedTransport {
    fn send_command(&self, record: &[u8]) -> Result<(), TransportError> {
        self.inner.send_command(record)
    }

    fn receive_record(&self, timeout: Duration) -> Result<Vec<u8>, TransportError> {
        let record = self.inner.receive_record(timeout)?;
        if let Ok(Record::Event(event)) = Record::parse(&record) {
            let mut events = self.tap.events.lock().unwrap();
            events.push(TappedEvent {
                kind: event.kind,
                status: event.status,
                local_port: event.local.port,
            });
            self.tap.grew.notify_all();
        }
        Ok(record)
    }

    fn send_ulpdu(&self, conn_index: u16, ulpdu: &[u8]) -> Result<(), TransportError> {
        self.inner.send_ulpdu(conn_index, ulpdu)
    }

    fn receive_ulpdu(&self, timeout: Duration) -> Result<(u16, Vec<u8>), TransportError> {
        self.inner.receive_ulpdu(timeout)
    }

    fn close(&self) {
        self.inner.close()
    }
}

/// One host: its driver, the rules checker over everything done with it, and every event
/// its reporting handlers saw, in order.
pub struct Host {
    pub device: Device,
    pub ip: [u8; 4],
    checker: TraceChecker,
    events: Receiver<(TracedId, CmEvent)>,
    sender: Sender<(TracedId, CmEvent)>,
    tap: Arc<RecordTap>,
}

impl Host {
    pub fn open(transport: InProcessTransport, ip: [u8; 4], config: DeviceConfig) -> Host {
        let tap = Arc::new(RecordTap::default());
        let transport = TappedTransport {
            inner: transport,
            tap: Arc::clone(&tap),
        };
        let device = Device::open_with(transport, config);
        device.register_qp(QPN);
        let (sender, events) = channel();
        Host {
            device,
            ip,
            checker: TraceChecker::new(),
            events,
            sender,
            tap,
        }
    }

    /// A new id whose handler reports each event to this host's event stream (when
    /// `report` is set), then returns what `react` returns.
    fn traced_id(&self, report: Option<Sender<(TracedId, CmEvent)>>, react: React) -> TracedId {
        let checker = self.checker.clone();
        let handler = self.checker.handler(move |id: &CmId, event: &CmEvent| {
            let id = TracedId {
                id: id.clone(),
                checker: checker.clone(),
            };
            if let Some(report) = &report {
                // The test may have stopped listening; the handler's result is what counts.
                let _ = report.send((id.clone(), event.clone()));
            }
            react(&id, event)
        });
        let id = self
            .device
            .create_cm_id(handler, Arc::new(()))
            .expect("the id table has room");
        TracedId {
            id,
            checker: self.checker.clone(),
        }
    }

    /// A new id in IDLE whose events the test sees through [`Host::next`].
    pub fn id(&self, react: React) -> TracedId {
        self.traced_id(Some(self.sender.clone()), react)
    }

    /// A new id whose events the test does not see (still checked by the rules).
    pub fn unseen_id(&self, react: React) -> TracedId {
        self.traced_id(None, react)
    }

    /// An id listening on this host's address at `port`.
    pub fn listener(&self, port: u16, backlog: u32, react: React) -> TracedId {
        let id = self.id(react);
        id.set_local_addr(addr(self.ip, port)).unwrap();
        id.listen(backlog).expect("listen");
        id
    }

    /// A listener on `port` that takes every request and leaves it unanswered: the child
    /// ids stay in CONN_RECV for the test to handle.
    pub fn sitting_listener(&self, port: u16, backlog: u32) -> TracedId {
        self.listener(port, backlog, report_only())
    }

    /// A listener on `port` that accepts every request from inside its handler, with
    /// `reply` as private data.
    pub fn accepting_listener(&self, port: u16, reply: &[u8]) -> TracedId {
        let reply = reply.to_vec();
        let on_event: React = Arc::new(move |id, event| match event.event {
            EventKind::ConnectRequest => id.accept(&param(&reply)),
            _ => Ok(()),
        });
        self.listener(port, 8, on_event)
    }

    /// An id connecting to `remote` with `private_data`; connect returned 0.
    pub fn connecting(&self, remote: SocketAddr, private_data: &[u8], react: React) -> TracedId {
        let id = self.id(react);
        id.set_local_addr(addr(self.ip, 0)).unwrap();
        id.set_remote_addr(remote).unwrap();
        id.connect(&param(private_data)).expect("connect");
        id
    }

    /// The next event a reporting handler saw, or a failure naming what was awaited.
    pub fn next(&self, what: &str) -> (TracedId, CmEvent) {
        self.events
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|_| panic!("no event: waited for {what}"))
    }

    /// The next event, which must be `kind` with `status`.
    pub fn expect(&self, kind: EventKind, status: i32) -> (TracedId, CmEvent) {
        let (id, event) = self.next(&format!("{kind:?}({status})"));
        assert_eq!((event.event, event.status), (kind, status), "{event:?}");
        (id, event)
    }

    /// No event for [`QUIET`].
    pub fn quiet(&self) {
        if let Ok((id, event)) = self.events.recv_timeout(QUIET) {
            panic!("unexpected event for {id:?}: {event:?}");
        }
    }

    /// Wait until the driver has received (not necessarily dispatched) an event record
    /// matching `wanted`.
    pub fn wait_for_record(&self, wanted: impl Fn(&TappedEvent) -> bool) {
        self.wait_for_records(1, wanted);
    }

    /// Wait until the driver has received `count` event records matching `wanted`.
    pub fn wait_for_records(&self, count: usize, wanted: impl Fn(&TappedEvent) -> bool) {
        let events = self.tap.events.lock().unwrap();
        let (_events, waited) = self
            .tap
            .grew
            .wait_timeout_while(events, PATIENCE, |events| {
                events.iter().filter(|e| wanted(e)).count() < count
            })
            .unwrap();
        assert!(
            !waited.timed_out(),
            "the NIC never raised the awaited event"
        );
    }

    /// Park this host's dispatch thread in a handler until the hold is released: events
    /// queue up in the driver, and no id changes state through one. `peer` knocks on a
    /// gate listener here to get that handler running.
    pub fn hold_dispatch(&self, peer: &Host) -> DispatchHold {
        let (entered_tx, entered) = channel();
        let (release, released) = channel::<()>();
        let released = Mutex::new(released);
        let on_gate: React = Arc::new(move |_, event| {
            if event.event != EventKind::ConnectRequest {
                return Ok(());
            }
            entered_tx.send(()).unwrap();
            let _ = released.lock().unwrap().recv_timeout(PATIENCE);
            // Rule 7: the knock is rejected and its id destroyed by the driver.
            Err(Errno::ECONNREFUSED)
        });
        let gate = self.unseen_id(on_gate);
        gate.set_local_addr(addr(self.ip, GATE_PORT)).unwrap();
        gate.listen(1).expect("listen on the gate port");
        let (replied_tx, replied) = channel();
        let on_knock: React = Arc::new(move |_, event| {
            replied_tx.send(event.status).unwrap();
            Ok(())
        });
        let knock = peer.unseen_id(on_knock);
        knock.set_remote_addr(addr(self.ip, GATE_PORT)).unwrap();
        knock.connect(&param(b"")).expect("knock on the gate");
        entered
            .recv_timeout(PATIENCE)
            .expect("the gate's handler runs");
        DispatchHold {
            release,
            gate,
            knock,
            replied,
        }
    }

    /// The trace is clean and the driver saw the NIC keep the host-interface protocol.
    fn check(&self) {
        self.checker.assert_clean();
        let stats = self.device.stats();
        // Every counter but this one is an anomaly (new ones included, by construction):
        // events for connections let go are normal until the NIC sees the release.
        let anomalies = DriverStats {
            events_for_forgotten_connections: 0,
            ..stats
        };
        assert_eq!(
            anomalies,
            DriverStats::default(),
            "driver anomalies: {stats:?}"
        );
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // A failing test is already failing; a second panic would abort the run.
        if !std::thread::panicking() {
            self.check();
        }
    }
}

/// A host's dispatch thread parked in a handler; see [`Host::hold_dispatch`].
pub struct DispatchHold {
    release: Sender<()>,
    gate: TracedId,
    knock: TracedId,
    replied: Receiver<i32>,
}

impl DispatchHold {
    /// Let the dispatch thread go on; the knock gets its refusal, the gate closes.
    pub fn release(self) {
        self.release.send(()).unwrap();
        let status = self
            .replied
            .recv_timeout(PATIENCE)
            .expect("the knock gets its CONNECT_REPLY");
        assert_eq!(status, -iwnic_proto::errno::ECONNREFUSED);
        self.knock.destroy();
        self.gate.destroy();
    }
}

/// The simulation and a host on each NIC: A at 10.0.0.1, B at 10.0.0.2.
pub struct Pair {
    pub a: Host,
    pub b: Host,
    sim: Sim,
    /// A initiates with MPA revision 1.
    a_mpa_v1: bool,
}

impl Pair {
    /// A pair on a clean link with the test firmware timers.
    pub fn new() -> Pair {
        Pair::with(SimConfig::default(), DeviceConfig::default())
    }

    /// A pair on `config`'s link (the firmware timers are the tests'), with A's driver
    /// configured by `a_config`.
    pub fn with(config: SimConfig, a_config: DeviceConfig) -> Pair {
        let mut sim = Sim::start(SimConfig {
            firmware: quick_firmware(),
            ..config
        })
        .expect("start the simulation");
        let a = Host::open(sim.transport(Side::A), A_IP, a_config);
        let b = Host::open(sim.transport(Side::B), B_IP, DeviceConfig::default());
        Pair {
            a,
            b,
            sim,
            a_mpa_v1: a_config.mpa_v1,
        }
    }

    /// B's listening address.
    pub fn b_addr(&self) -> SocketAddr {
        addr(B_IP, PORT)
    }

    /// A connects to B on [`PORT`] with `private_data`.
    pub fn connect(&self, private_data: &[u8]) -> TracedId {
        self.a
            .connecting(self.b_addr(), private_data, report_only())
    }

    /// B accepts from its listener's handler with `reply`; A connects with `private_data`.
    /// Both see the connection up, each event carrying what the contract says.
    pub fn establish(&self, private_data: &[u8], reply: &[u8]) -> (TracedId, TracedId) {
        let listener = self.b.accepting_listener(PORT, reply);
        let connection = self.established(private_data, reply);
        listener.destroy();
        connection
    }

    /// A connects to B's listener on [`PORT`], which accepts with `reply`; the ids of both
    /// ends once each has seen the connection up.
    pub fn established(&self, private_data: &[u8], reply: &[u8]) -> (TracedId, TracedId) {
        let a_id = self.connect(private_data);
        let (b_child, request) = self.b.expect(EventKind::ConnectRequest, 0);
        // Rule 9: the initiator's IRD and ORD, and its private data without the v2 block.
        // An MPA v1 request carries no IRD or ORD: the contract does not say what the
        // event reports then, so only v2 is held to it.
        assert_eq!(request.private_data, private_data);
        if !self.a_mpa_v1 {
            assert_eq!((request.ird, request.ord), (IRD, ORD));
        }
        assert_eq!(request.local_addr, self.b_addr());
        let (b_id, established) = self.b.expect(EventKind::Established, 0);
        assert_eq!(b_id, b_child);
        assert_eq!(
            (established.ird, established.ord),
            (ORD, IRD),
            "rule 9: local ORD in ird, local IRD in ord"
        );
        let (id, reply_event) = self.a.expect(EventKind::ConnectReply, 0);
        assert_eq!(id, a_id);
        assert_eq!(reply_event.private_data, reply);
        assert_eq!((reply_event.ird, reply_event.ord), (ORD, IRD), "rule 9");
        assert_eq!(reply_event.remote_addr, self.b_addr());
        assert_eq!(a_id.state(), Some(IdState::Established));
        (a_id, b_id)
    }

    /// Check both hosts (rules and driver statistics), close them, stop the simulation.
    pub fn stop(self) -> SimReport {
        let Pair { a, b, sim, .. } = self;
        // Dropping a host checks it, then closes its device.
        drop(a);
        drop(b);
        sim.stop()
    }
}
