//! A scripted fake NIC on the far end of the in-process link, answering commands the way
//! the firmware does (`firmware/src/commands.rs`): one completion per command; Listen and
//! Connect complete with the new handle; an accept completes when the connection is
//! established, with ESTABLISHED right behind it; events are numbered from 1; DISCONNECT
//! before CLOSE; nothing after Release. Tests raise the network's side (a connect request,
//! the peer's reply, the peer closing) with its methods.
#![allow(dead_code)] // each test binary uses its own part of the fixture

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use iwnic_host_driver::errno::{ECONNRESET, EINVAL};
use iwnic_host_driver::rules::TraceChecker;
use iwnic_host_driver::{
    in_process, CmEvent, CmId, ConnParam, Device, DeviceConfig, EventKind, InProcessNic,
};
use iwnic_proto::host::{Command, CommandKind, CommandRecord, Completion, Endpoint, Event};
use iwnic_proto::mpa::RtrTypes;

pub const LOCAL: [u8; 4] = [10, 0, 0, 1];
pub const PEER: [u8; 4] = [10, 0, 0, 2];
pub const PORT: u16 = 4791;
pub const PEER_PORT: u16 = 50_000;
/// The NIC's IRD/ORD limit (the firmware's default).
pub const MAX_IRD_ORD: u16 = 64;
pub const QPN: u32 = 7;
/// Bounds every wait for something the driver does on its own threads, so a broken
/// driver fails the test instead of hanging it. No test depends on its value.
pub const PATIENCE: Duration = Duration::from_secs(10);

pub fn local_addr(port: u16) -> SocketAddr {
    SocketAddr::from((LOCAL, port))
}

pub fn peer_addr() -> SocketAddr {
    SocketAddr::from((PEER, PEER_PORT))
}

/// A command as the fake NIC received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub kind: CommandKind,
    pub handle: u32,
    pub ird: u16,
    pub ord: u16,
    pub abrupt: bool,
    pub private_data: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Conn {
    /// CONNECT_REQUEST raised, waiting for accept or reject.
    Raised,
    /// Connect completed; CONNECT_REPLY owed.
    Connecting,
    Established,
    /// Host disconnected gracefully; CLOSE pushed.
    Closed,
}

/// How the fake NIC answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// At once, as the firmware does.
    Now,
    /// Commands are recorded but not answered until [`FakeNic::answer_held`].
    Hold,
    /// Never (the NIC hangs).
    Never,
}

struct Model {
    next_seq: u32,
    next_handle: u32,
    conns: HashMap<u32, Conn>,
    received: Vec<Received>,
    held: Vec<Vec<u8>>,
    answer: Answer,
    /// Status of the next Listen (0: success).
    listen_status: i32,
    /// CONNECT_REPLY status pushed right after a Connect completes; `None`: the test does.
    auto_connect_reply: Option<i32>,
    /// The handle to give out next instead of a new one (see [`FakeNic::reuse_handle`]).
    reused_handle: Option<u32>,
}

pub struct FakeNic {
    nic: InProcessNic,
    model: Arc<Mutex<Model>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    commands: Receiver<Received>,
}

fn endpoint(addr: [u8; 4], port: u16) -> Endpoint {
    Endpoint::v4(addr, port)
}

impl FakeNic {
    pub fn start(nic: InProcessNic) -> FakeNic {
        let model = Arc::new(Mutex::new(Model {
            next_seq: 1,
            next_handle: 0x0001_0001,
            conns: HashMap::new(),
            received: Vec::new(),
            held: Vec::new(),
            answer: Answer::Now,
            listen_status: 0,
            auto_connect_reply: Some(0),
            reused_handle: None,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, commands) = channel();
        let thread = {
            let (nic, model, stop) = (nic.clone(), Arc::clone(&model), Arc::clone(&stop));
            std::thread::spawn(move || serve(nic, model, stop, tx))
        };
        FakeNic {
            nic,
            model,
            stop,
            thread: Some(thread),
            commands,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Model> {
        self.model.lock().unwrap()
    }

    pub fn set_answer(&self, answer: Answer) {
        self.lock().answer = answer;
    }

    pub fn set_listen_status(&self, status: i32) {
        self.lock().listen_status = status;
    }

    pub fn set_auto_connect_reply(&self, status: Option<i32>) {
        self.lock().auto_connect_reply = status;
    }

    /// Give out `handle` again as the next new handle (a Listen's, a Connect's or a
    /// connect request's), as a confused NIC would.
    pub fn reuse_handle(&self, handle: u32) {
        self.lock().reused_handle = Some(handle);
    }

    /// Answer the commands held so far, in order, and go back to answering at once.
    pub fn answer_held(&self) {
        let mut m = self.lock();
        m.answer = Answer::Now;
        for bytes in std::mem::take(&mut m.held) {
            answer(&self.nic, &mut m, &bytes);
        }
    }

    /// The next command the fake NIC received (waits for it).
    pub fn next_command(&self) -> Received {
        self.commands
            .recv_timeout(PATIENCE)
            .expect("the driver sent a command")
    }

    /// Every command received so far.
    pub fn received(&self) -> Vec<Received> {
        self.lock().received.clone()
    }

    /// The handles of the commands of `kind` received so far, in order.
    pub fn handles_of(&self, kind: CommandKind) -> Vec<u32> {
        self.received_where(|c| (c.kind == kind).then_some(c.handle))
    }

    /// The kinds of the commands on `handle` received so far, in order.
    pub fn kinds_on(&self, handle: u32) -> Vec<CommandKind> {
        self.received_where(|c| (c.handle == handle).then_some(c.kind))
    }

    /// The kinds of the commands on `handle` received so far with their abrupt flags (set
    /// on an abrupt Disconnect only), in order.
    pub fn commands_on(&self, handle: u32) -> Vec<(CommandKind, bool)> {
        self.received_where(|c| (c.handle == handle).then_some((c.kind, c.abrupt)))
    }

    /// Wait until the driver has told the NIC that `conn`'s request was delivered: a
    /// CONNECT_REQUEST handler returned without answering it (rule 10).
    pub fn wait_delivered(&self, conn: u32) {
        let start = std::time::Instant::now();
        while !self.kinds_on(conn).contains(&CommandKind::Delivered) {
            assert!(
                start.elapsed() < PATIENCE,
                "no Delivered for connection {conn}"
            );
            std::thread::yield_now();
        }
    }

    /// What `pick` takes of each command received so far, in order.
    fn received_where<T>(&self, pick: impl FnMut(&Received) -> Option<T>) -> Vec<T> {
        self.lock().received.iter().filter_map(pick).collect()
    }

    /// A peer's MPA request on `listener`: raises CONNECT_REQUEST; the new connection's handle.
    pub fn connect_request(&self, listener: u32, private_data: &[u8]) -> u32 {
        let mut m = self.lock();
        let conn = m.new_handle();
        m.conns.insert(conn, Conn::Raised);
        push_event(
            &self.nic,
            &mut m,
            EventKind::ConnectRequest,
            conn,
            listener,
            0,
            (5, 6),
            private_data,
        );
        conn
    }

    /// The peer's answer to our MPA request on `conn`.
    pub fn connect_reply(&self, conn: u32, status: i32, private_data: &[u8]) {
        let mut m = self.lock();
        m.conns.insert(conn, Conn::Established);
        if status != 0 {
            m.conns.remove(&conn);
        }
        push_event(
            &self.nic,
            &mut m,
            EventKind::ConnectReply,
            conn,
            0,
            status,
            (3, 4),
            private_data,
        );
    }

    /// The peer closes `conn`: DISCONNECT (FIN) then CLOSE, or CLOSE -ECONNRESET for a reset.
    pub fn peer_closes(&self, conn: u32, reset: bool) {
        let mut m = self.lock();
        m.conns.remove(&conn);
        if !reset {
            push_event(
                &self.nic,
                &mut m,
                EventKind::Disconnect,
                conn,
                0,
                0,
                (3, 4),
                &[],
            );
        }
        let status = if reset { -ECONNRESET } else { 0 };
        push_event(
            &self.nic,
            &mut m,
            EventKind::Close,
            conn,
            0,
            status,
            (3, 4),
            &[],
        );
    }

    /// Only the peer's FIN: DISCONNECT, with CLOSE still to come.
    pub fn peer_fin(&self, conn: u32) {
        let mut m = self.lock();
        push_event(
            &self.nic,
            &mut m,
            EventKind::Disconnect,
            conn,
            0,
            0,
            (3, 4),
            &[],
        );
    }

    /// A raised request's connection dies before the host answers it.
    pub fn request_dies(&self, conn: u32) {
        self.lock().conns.remove(&conn);
    }

    /// Push raw record bytes (for malformed and out-of-sequence records).
    pub fn push_raw(&self, record: &[u8]) {
        self.nic.push_record(record);
    }

    /// Take the next sequence number (to forge a record with it).
    pub fn take_seq(&self) -> u32 {
        let mut m = self.lock();
        let seq = m.next_seq;
        m.next_seq += 1;
        seq
    }

    /// The newest handle the fake NIC made (a Listen's or a Connect's; one given out
    /// again by [`FakeNic::reuse_handle`] is not new).
    pub fn last_handle(&self) -> u32 {
        self.lock().next_handle - 1
    }

    pub fn nic(&self) -> &InProcessNic {
        &self.nic
    }
}

impl Drop for FakeNic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Model {
    fn new_handle(&mut self) -> u32 {
        if let Some(handle) = self.reused_handle.take() {
            return handle;
        }
        let handle = self.next_handle;
        self.next_handle += 1;
        handle
    }
}

fn serve(nic: InProcessNic, model: Arc<Mutex<Model>>, stop: Arc<AtomicBool>, tx: Sender<Received>) {
    while !stop.load(Ordering::SeqCst) {
        let Ok(bytes) = nic.wait_command(Duration::from_millis(20)) else {
            if nic.is_closed() {
                return;
            }
            continue;
        };
        let record = CommandRecord::parse(&bytes).expect("the driver sends well-formed commands");
        let received = received_of(&record.command);
        let mut m = model.lock().unwrap();
        m.received.push(received.clone());
        let _ = tx.send(received);
        match m.answer {
            Answer::Now => answer(&nic, &mut m, &bytes),
            Answer::Hold => m.held.push(bytes),
            Answer::Never => {}
        }
    }
}

fn received_of(command: &Command<'_>) -> Received {
    let mut r = Received {
        kind: command.kind(),
        handle: 0,
        ird: 0,
        ord: 0,
        abrupt: false,
        private_data: Vec::new(),
    };
    match *command {
        Command::Listen { .. } => {}
        Command::Unlisten { listener } => r.handle = listener,
        Command::Connect {
            ird,
            ord,
            private_data,
            ..
        } => (r.ird, r.ord, r.private_data) = (ird, ord, private_data.to_vec()),
        Command::Accept {
            conn,
            ird,
            ord,
            private_data,
            ..
        } => (r.handle, r.ird, r.ord, r.private_data) = (conn, ird, ord, private_data.to_vec()),
        Command::Reject { conn, private_data } => {
            (r.handle, r.private_data) = (conn, private_data.to_vec())
        }
        Command::Disconnect { conn, abrupt } => (r.handle, r.abrupt) = (conn, abrupt),
        Command::Release { conn } | Command::Delivered { conn } => r.handle = conn,
    }
    r
}

/// The firmware's answer to one command.
fn answer(nic: &InProcessNic, m: &mut Model, bytes: &[u8]) {
    let record = CommandRecord::parse(bytes).unwrap();
    let tag = record.tag;
    let complete = |status: i32, handle: u32| {
        let mut buf = [0u8; 16];
        let len = Completion {
            tag,
            status,
            handle,
        }
        .emit(&mut buf)
        .unwrap();
        nic.push_record(&buf[..len]);
    };
    match record.command {
        Command::Listen { .. } => {
            if m.listen_status == 0 {
                complete(0, m.new_handle());
            } else {
                complete(m.listen_status, 0);
            }
        }
        Command::Unlisten { .. } => complete(0, 0),
        Command::Connect { ird, ord, .. } => {
            if ird > MAX_IRD_ORD || ord > MAX_IRD_ORD {
                return complete(-EINVAL, 0);
            }
            let conn = m.new_handle();
            m.conns.insert(conn, Conn::Connecting);
            complete(0, conn);
            if let Some(status) = m.auto_connect_reply {
                if status != 0 {
                    m.conns.remove(&conn);
                } else {
                    m.conns.insert(conn, Conn::Established);
                }
                push_event(
                    nic,
                    m,
                    EventKind::ConnectReply,
                    conn,
                    0,
                    status,
                    (ird, ord),
                    &[],
                );
            }
        }
        Command::Accept { conn, ird, ord, .. } => match m.conns.get(&conn) {
            Some(Conn::Raised) if ird <= MAX_IRD_ORD && ord <= MAX_IRD_ORD => {
                m.conns.insert(conn, Conn::Established);
                complete(0, conn);
                push_event(nic, m, EventKind::Established, conn, 0, 0, (ird, ord), &[]);
            }
            Some(Conn::Raised) => {
                m.conns.remove(&conn);
                complete(-EINVAL, conn);
            }
            None => complete(-ECONNRESET, 0),
            Some(_) => complete(-EINVAL, 0),
        },
        Command::Reject { conn, .. } => match m.conns.get(&conn) {
            Some(Conn::Raised) => {
                m.conns.remove(&conn);
                complete(0, 0);
            }
            None => complete(-ECONNRESET, 0),
            Some(_) => complete(-EINVAL, 0),
        },
        Command::Disconnect { conn, abrupt } => match m.conns.get(&conn).copied() {
            Some(Conn::Established) => {
                complete(0, conn);
                m.conns.insert(conn, Conn::Closed);
                let status = if abrupt { -ECONNRESET } else { 0 };
                push_event(nic, m, EventKind::Close, conn, 0, status, (0, 0), &[]);
            }
            Some(Conn::Connecting) => {
                complete(0, conn);
                m.conns.remove(&conn);
                push_event(
                    nic,
                    m,
                    EventKind::ConnectReply,
                    conn,
                    0,
                    -ECONNRESET,
                    (0, 0),
                    &[],
                );
            }
            _ => complete(0, conn),
        },
        Command::Release { conn } => {
            m.conns.remove(&conn);
            complete(0, 0);
        }
        Command::Delivered { conn } => match m.conns.get(&conn) {
            Some(Conn::Raised) => complete(0, 0),
            None => complete(-ECONNRESET, 0),
            Some(_) => complete(-EINVAL, 0),
        },
    }
}

#[allow(clippy::too_many_arguments)]
fn push_event(
    nic: &InProcessNic,
    m: &mut Model,
    kind: EventKind,
    conn: u32,
    listener: u32,
    status: i32,
    (ird, ord): (u16, u16),
    private_data: &[u8],
) {
    let event = Event {
        seq: m.next_seq,
        kind,
        conn,
        listener,
        status,
        local: endpoint(LOCAL, PORT),
        remote: endpoint(PEER, PEER_PORT),
        ird,
        ord,
        rtr: RtrTypes::NONE,
        private_data,
    };
    m.next_seq += 1;
    let mut buf = vec![0u8; event.buffer_len()];
    let len = event.emit(&mut buf).unwrap();
    nic.push_record(&buf[..len]);
}

/// A device on a fake NIC, with a rules checker over everything the tests do.
pub struct Harness {
    pub device: Device,
    pub nic: FakeNic,
    pub checker: TraceChecker,
}

/// What handlers saw, in order: (id, event).
pub type Seen = Receiver<(CmId, CmEvent)>;

impl Harness {
    pub fn new() -> Harness {
        Harness::with_config(DeviceConfig::default())
    }

    pub fn with_config(config: DeviceConfig) -> Harness {
        let (transport, nic) = in_process(iwnic_host_driver::DEFAULT_HOST_QUEUE_CAPACITY);
        let device = Device::open_with(transport, config);
        device.register_qp(QPN);
        Harness {
            device,
            nic: FakeNic::start(nic),
            checker: TraceChecker::new(),
        }
    }

    /// A new id whose handler reports every event on the returned channel, then runs
    /// `react` (the handler's own behaviour) and returns its result.
    pub fn id_with(
        &self,
        react: impl Fn(&CmId, &CmEvent) -> iwnic_host_driver::Result<()> + Send + Sync + 'static,
    ) -> (CmId, Seen) {
        let (tx, rx) = channel();
        let tx = Mutex::new(tx);
        let handler = self.checker.handler(move |id: &CmId, event: &CmEvent| {
            let _ = tx.lock().unwrap().send((id.clone(), event.clone()));
            react(id, event)
        });
        let id = self
            .device
            .create_cm_id(handler, Arc::new(()))
            .expect("create an id");
        (id, rx)
    }

    pub fn id(&self) -> (CmId, Seen) {
        self.id_with(|_, _| Ok(()))
    }

    /// A listening id on [`PORT`]; its NIC listener handle.
    pub fn listener_with(
        &self,
        react: impl Fn(&CmId, &CmEvent) -> iwnic_host_driver::Result<()> + Send + Sync + 'static,
    ) -> (CmId, Seen, u32) {
        let (id, seen) = self.id_with(react);
        id.set_local_addr(local_addr(PORT)).unwrap();
        self.checker
            .call(&id, iwnic_host_driver::rules::Call::Listen, || id.listen(8))
            .expect("listen");
        (id, seen, self.nic.last_handle())
    }

    /// Wait for the next event a handler saw.
    pub fn next_event(seen: &Seen) -> (CmId, CmEvent) {
        seen.recv_timeout(PATIENCE)
            .expect("an event reached the handler")
    }

    /// Wait until the dispatch thread has run everything queued before this point: a
    /// marker event on a fresh id of its own, which reaches its handler only after every
    /// earlier event has been dispatched (one ordered context, rule 1).
    pub fn settle(&self) {
        // Rejected in its handler, so no Delivered follows it (rule 10).
        let (marker, seen) = self.id_with(|child, _| child.reject(&[]));
        marker.set_local_addr(local_addr(PORT + 1)).unwrap();
        marker.listen(1).unwrap();
        self.nic.connect_request(self.nic.last_handle(), b"settle");
        Harness::next_event(&seen);
        marker.destroy();
    }

    pub fn param(&self) -> ConnParam {
        ConnParam {
            private_data: b"accept".to_vec(),
            ord: 2,
            ird: 3,
            qpn: QPN,
        }
    }
}

/// Collect what is already on the channel without waiting.
pub fn drain(seen: &Seen) -> Vec<(CmId, CmEvent)> {
    seen.try_iter().collect()
}
