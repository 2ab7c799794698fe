//! A device, its ids and the two threads that serve them.
//!
//! - The **receive thread** reads every record the NIC pushes. A completion wakes the call
//!   waiting for its tag and applies the call's effect on the id table at once (a new
//!   listener or connection handle is mapped to its id before the next record, so the
//!   events that follow a completion always find their id). An event has its sequence
//!   number checked and joins the dispatch queue.
//! - The **dispatch thread** takes events in order, applies each one's state transition
//!   and runs the application's handler, one at a time. Handlers may call the API: a call
//!   waits only for the receive thread, never for the dispatch thread, so accepting from
//!   the CONNECT_REQUEST handler cannot deadlock.
//!
//! Every piece of state lives in one [`Table`] under one mutex; a condition variable
//! signals every change anyone waits for (a completion, a handler finishing, a call in
//! flight settling, a queued event).

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle, ThreadId};
use std::time::{Duration, Instant};

use iwnic_proto::host::{self, Command, CommandKind, CommandRecord, Completion, Endpoint, Record};

use crate::cm::{
    CmEvent, ConnParam, Context, EventKind, Handler, IdState, QpAttrUpdate, QpState, RtrTypes,
    IB_ACCESS_REMOTE_READ, IB_ACCESS_REMOTE_WRITE, IB_QP_ACCESS_FLAGS, IB_QP_STATE,
    MAX_PRIVATE_DATA,
};
use crate::errno::{Errno, Result, EIO};
use crate::transport::{Transport, TransportError};

/// Settings of one opened device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceConfig {
    /// Ids that may exist at once; `create_cm_id` beyond it returns -ENOMEM.
    pub max_ids: usize,
    /// How long a call waits for the NIC's completion before returning -ETIMEDOUT. It
    /// must outlast the NIC's own timers: a disconnect after a peer-to-peer accept waits
    /// as long for the ESTABLISHED, which comes with the initiator's RTR (the firmware
    /// waits up to 10 s for it).
    pub command_timeout: Duration,
    /// Initiate with MPA revision 1 (RFC 5044) instead of 2 (RFC 6581: enhanced setup,
    /// peer-to-peer with an RTR). Like the kernel providers' MPA-version parameter, it is
    /// per device.
    pub mpa_v1: bool,
}

impl Default for DeviceConfig {
    fn default() -> DeviceConfig {
        DeviceConfig {
            max_ids: 65_536,
            command_timeout: Duration::from_secs(30),
            mpa_v1: false,
        }
    }
}

/// Anomalies the driver saw on the host interface. Any non-zero field but
/// `events_for_forgotten_connections` means the NIC broke the protocol.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Events whose sequence number skipped ahead (events lost).
    pub seq_gaps: u64,
    /// Events whose sequence number was already seen (dropped).
    pub seq_duplicates: u64,
    /// Records that did not decode, or were commands.
    pub malformed_records: u64,
    /// Completions with a tag no call sent.
    pub unmatched_completions: u64,
    /// Events an id's state does not allow (dropped).
    pub unexpected_events: u64,
    /// Events for connections the driver already let go (destroyed, rejected, failed
    /// accept): normal while the NIC has not yet seen the release; dropped.
    pub events_for_forgotten_connections: u64,
    /// Listeners and connections the NIC created for a call that had already timed out,
    /// released at once.
    pub orphans_released: u64,
    /// Listener and connection handles the NIC gave out (in a completion or a
    /// CONNECT_REQUEST) while another id still held them: the holder kept its handle,
    /// the newcomer was refused.
    pub duplicate_handles: u64,
    /// Handlers that panicked (treated as a non-zero return).
    pub handler_panics: u64,
}

/// An id's number, unique for the life of its device (never reused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdKey(pub u64);

impl std::fmt::Display for IdKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "id{}", self.0)
    }
}

/// The NIC object an id stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NicObject {
    None,
    Listener(u32),
    Connection(u32),
}

struct IdEntry {
    state: IdState,
    handler: Handler,
    context: Context,
    local_addr: Option<SocketAddr>,
    remote_addr: Option<SocketAddr>,
    nic: NicObject,
    /// A listen, connect or accept is waiting for its completion.
    call_in_flight: bool,
    /// CONN_RECV after a successful accept, until ESTABLISHED.
    accepted: bool,
    /// `Some(abrupt)`: a disconnect asked for on the dispatch thread while `accepted`,
    /// sent when the ESTABLISHED is dispatched (see [`CmId::disconnect`]).
    deferred_disconnect: Option<bool>,
    /// The NIC has seen a connect for this id: it gets no second one (**stricter**;
    /// CLOSE is an id's last event, rule 6).
    connect_sent: bool,
}

/// A command sent and not yet completed.
struct Pending {
    id: Option<IdKey>,
    kind: CommandKind,
    completion: Option<Completion>,
    /// The caller gave up waiting (timeout); a late success must be undone.
    abandoned: bool,
}

/// An event from the NIC, owned, waiting for dispatch.
struct QueuedEvent {
    kind: EventKind,
    conn: u32,
    listener: u32,
    status: i32,
    local: SocketAddr,
    remote: SocketAddr,
    ird: u16,
    ord: u16,
    rtr: RtrTypes,
    private_data: Vec<u8>,
}

/// The handler running now: for which id, and for CONNECT_REQUEST the listener whose
/// handler it is (destroying either waits for it).
#[derive(Clone, Copy)]
struct Running {
    id: IdKey,
    listener: Option<IdKey>,
}

impl Running {
    fn involves(&self, key: IdKey) -> bool {
        self.id == key || self.listener == Some(key)
    }
}

struct Table {
    ids: HashMap<IdKey, IdEntry>,
    next_key: u64,
    by_conn: HashMap<u32, IdKey>,
    by_listener: HashMap<u32, IdKey>,
    qps: HashSet<u32>,
    pending: HashMap<u32, Pending>,
    next_tag: u32,
    next_seq: u32,
    events: VecDeque<QueuedEvent>,
    running: Option<Running>,
    dispatch_thread: Option<ThreadId>,
    /// The device was closed or the link went down: calls return -ENODEV.
    down: bool,
    stats: DriverStats,
}

pub(crate) struct Shared {
    transport: Box<dyn Transport>,
    config: DeviceConfig,
    table: Mutex<Table>,
    changed: Condvar,
}

/// How long the receive thread blocks in one `receive_record`; it only bounds how often
/// an idle thread wakes, the link's `close` ends the wait at once.
const RECEIVE_POLL: Duration = Duration::from_secs(1);

/// An opened NIC. Dropping it closes the device: the threads stop, the link closes, and
/// every call on its ids returns -ENODEV.
pub struct Device {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Device {
    /// Open a device over `transport` with the default settings.
    pub fn open(transport: impl Transport + 'static) -> Device {
        Device::open_with(transport, DeviceConfig::default())
    }

    pub fn open_with(transport: impl Transport + 'static, config: DeviceConfig) -> Device {
        let shared = Arc::new(Shared {
            transport: Box::new(transport),
            config,
            table: Mutex::new(Table {
                ids: HashMap::new(),
                next_key: 1,
                by_conn: HashMap::new(),
                by_listener: HashMap::new(),
                qps: HashSet::new(),
                pending: HashMap::new(),
                next_tag: 1,
                next_seq: 1,
                events: VecDeque::new(),
                running: None,
                dispatch_thread: None,
                down: false,
                stats: DriverStats::default(),
            }),
            changed: Condvar::new(),
        });
        let receiver = {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name("iwnic-receive".into())
                .spawn(move || shared.receive_loop())
                .expect("spawn the receive thread")
        };
        let dispatcher = {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name("iwnic-dispatch".into())
                .spawn(move || shared.dispatch_loop())
                .expect("spawn the dispatch thread")
        };
        shared.lock().dispatch_thread = Some(dispatcher.thread().id());
        Device {
            shared,
            threads: vec![receiver, dispatcher],
        }
    }

    /// `iw_create_cm_id`: a new id in IDLE. -ENOMEM when the id table is full.
    pub fn create_cm_id(
        &self,
        handler: impl Fn(&CmId, &CmEvent) -> Result<()> + Send + Sync + 'static,
        context: Context,
    ) -> Result<CmId> {
        self.create_cm_id_shared(Arc::new(handler), context)
    }

    /// `create_cm_id` with a handler already shared (a C shim, or one handler for many ids).
    pub fn create_cm_id_shared(&self, handler: Handler, context: Context) -> Result<CmId> {
        let mut t = self.shared.lock();
        if t.down {
            return Err(Errno::ENODEV);
        }
        let key = t
            .insert_id(self.shared.config.max_ids, handler, context, IdState::Idle)
            .ok_or(Errno::ENOMEM)?;
        Ok(self.shared.id(key))
    }

    /// Make `qpn` known to accept and connect (the kernel's `iw_get_qp` lookup).
    pub fn register_qp(&self, qpn: u32) {
        self.shared.lock().qps.insert(qpn);
    }

    pub fn unregister_qp(&self, qpn: u32) {
        self.shared.lock().qps.remove(&qpn);
    }

    pub fn stats(&self) -> DriverStats {
        self.shared.lock().stats
    }

    /// The link, for the data path (ULPDUs tagged with connection indexes).
    pub fn transport(&self) -> &dyn Transport {
        self.shared.transport.as_ref()
    }

    /// Ids alive now (destroyed ones are gone; DESTROYING ones still count).
    pub fn id_count(&self) -> usize {
        self.shared.lock().ids.len()
    }

    /// Close the device now instead of at drop. Ids not destroyed are abandoned: the NIC
    /// sees its link close.
    pub fn close(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        {
            let mut t = self.shared.lock();
            t.down = true;
        }
        self.shared.changed.notify_all();
        self.shared.transport.close();
        let me = thread::current().id();
        for handle in self.threads.drain(..) {
            // Dropped from a handler: the dispatch thread ends by itself once it returns.
            if handle.thread().id() != me {
                let _ = handle.join();
            }
        }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// One iw_cm id (`struct iw_cm_id`). Clones name the same id; after `destroy` every
/// call on any clone returns -EINVAL.
#[derive(Clone)]
pub struct CmId {
    shared: Arc<Shared>,
    key: IdKey,
}

impl std::fmt::Debug for CmId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CmId").field(&self.key).finish()
    }
}

impl PartialEq for CmId {
    fn eq(&self, other: &CmId) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared) && self.key == other.key
    }
}

impl Eq for CmId {}

impl CmId {
    pub fn key(&self) -> IdKey {
        self.key
    }

    /// The datapath index of the id's connection (the low 16 bits of the NIC's handle):
    /// the tag of its ULPDUs on [`crate::Transport::send_ulpdu`] and `receive_ulpdu`.
    /// `None` while the id has no connection.
    pub fn connection_index(&self) -> Option<u16> {
        match self.shared.lock().ids.get(&self.key)?.nic {
            NicObject::Connection(handle) => Some((handle & 0xFFFF) as u16),
            _ => None,
        }
    }

    /// The id's state; `None` once destroyed.
    pub fn state(&self) -> Option<IdState> {
        self.shared.lock().ids.get(&self.key).map(|e| e.state)
    }

    /// The context given at creation (for a child id: its listener's), or the last set.
    pub fn context(&self) -> Option<Context> {
        let t = self.shared.lock();
        t.ids.get(&self.key).map(|e| Arc::clone(&e.context))
    }

    /// Replace the context (the kernel's `cm_id->context = …`, common on child ids).
    pub fn set_context(&self, context: Context) -> Result<()> {
        let mut t = self.shared.lock();
        t.ids.get_mut(&self.key).ok_or(Errno::EINVAL)?.context = context;
        Ok(())
    }

    /// The local address (`cm_id->local_addr`). Set before listen (required) and connect
    /// (optional: unset means any address and an ephemeral port); a connection's id gets
    /// the real one from its CONNECT_REQUEST or CONNECT_REPLY.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.shared.lock().ids.get(&self.key)?.local_addr
    }

    pub fn remote_addr(&self) -> Option<SocketAddr> {
        self.shared.lock().ids.get(&self.key)?.remote_addr
    }

    /// Set the local address; only in IDLE (-EINVAL otherwise).
    pub fn set_local_addr(&self, addr: SocketAddr) -> Result<()> {
        self.shared
            .with_idle_entry(self.key, |e| e.local_addr = Some(addr))
    }

    /// Set the remote address connect will reach; only in IDLE (-EINVAL otherwise).
    pub fn set_remote_addr(&self, addr: SocketAddr) -> Result<()> {
        self.shared
            .with_idle_entry(self.key, |e| e.remote_addr = Some(addr))
    }

    /// `iw_cm_listen`: IDLE → LISTEN. A backlog of 0 takes the NIC's default (256). The
    /// backlog bounds requests not yet delivered to the application (rule 10): once a
    /// CONNECT_REQUEST handler returns without answering, the driver tells the NIC, and
    /// the request no longer counts.
    pub fn listen(&self, backlog: u32) -> Result<()> {
        let shared = &self.shared;
        let mut t = shared.lock_up()?;
        let entry = t.entry_mut(self.key)?;
        if entry.state != IdState::Idle {
            return Err(Errno::EINVAL);
        }
        let local = endpoint(entry.local_addr.ok_or(Errno::EINVAL)?);
        entry.state = IdState::Listen;
        entry.call_in_flight = true;
        let command = Command::Listen { local, backlog };
        let (mut t, result) = shared.execute(t, Some(self.key), command);
        shared.settle(&mut t, self.key);
        result.map(drop)
    }

    /// `iw_cm_connect`: IDLE → CONN_SENT; then exactly one CONNECT_REPLY (rule 4). An id
    /// carries one connection attempt: connect again on it returns -EINVAL (**stricter**),
    /// after a failure and after a CLOSE too, which is the id's last event (rule 6); the
    /// kernel's id may connect again from IDLE.
    pub fn connect(&self, param: &ConnParam) -> Result<()> {
        let shared = &self.shared;
        let mut t = shared.lock_up()?;
        let qp_known = t.qps.contains(&param.qpn);
        let entry = t.entry_mut(self.key)?;
        if entry.state != IdState::Idle || entry.connect_sent {
            return Err(Errno::EINVAL);
        }
        let remote = entry.remote_addr.ok_or(Errno::EINVAL)?;
        let local = entry.local_addr.unwrap_or_else(|| unspecified(&remote));
        let (ird, ord) = check_param(param, qp_known)?;
        entry.state = IdState::ConnSent;
        entry.call_in_flight = true;
        entry.connect_sent = true;
        let command = Command::Connect {
            local: endpoint(local),
            remote: endpoint(remote),
            ird,
            ord,
            qpn: param.qpn,
            mpa_v1: shared.config.mpa_v1,
            private_data: &param.private_data,
        };
        let (mut t, result) = shared.execute(t, Some(self.key), command);
        shared.settle(&mut t, self.key);
        result.map(drop)
    }

    /// `iw_cm_accept`: legal in CONN_RECV before any accept. The id stays in CONN_RECV
    /// until ESTABLISHED, which may be delivered before this returns (rule 2). On failure
    /// the id is IDLE and gets no event ever (rule 3).
    pub fn accept(&self, param: &ConnParam) -> Result<()> {
        self.accept_with(|qp_known| check_param(param, qp_known), param)
    }

    /// An accept whose parameters could not even be read (the C API's null or
    /// overlong `conn_param`): it fails as one with bad parameters does, ending the
    /// connection, so the id does not stay CONN_RECV to be accepted again.
    pub(crate) fn accept_unreadable(&self, errno: Errno) -> Result<()> {
        self.accept_with(|_| Err(errno), &ConnParam::default())
    }

    /// `accept` with `check` judging the parameters (given whether the QP is known).
    fn accept_with(
        &self,
        check: impl FnOnce(bool) -> Result<(u16, u16)>,
        param: &ConnParam,
    ) -> Result<()> {
        let shared = &self.shared;
        let mut t = shared.lock_up()?;
        let qp_known = t.qps.contains(&param.qpn);
        let entry = t.entry_mut(self.key)?;
        if entry.state != IdState::ConnRecv || entry.accepted || entry.call_in_flight {
            return Err(Errno::EINVAL);
        }
        let NicObject::Connection(conn) = entry.nic else {
            return Err(Errno::EINVAL);
        };
        let (ird, ord) = match check(qp_known) {
            Ok(limits) => limits,
            Err(errno) => {
                // A failed accept ends the connection: the NIC must forget it too.
                t.forget(self.key);
                drop(t);
                shared.send_unwaited(Command::Release { conn });
                return Err(errno);
            }
        };
        t.entry_mut(self.key)?.call_in_flight = true;
        let command = Command::Accept {
            conn,
            ird,
            ord,
            qpn: param.qpn,
            private_data: &param.private_data,
        };
        let (mut t, result) = shared.execute(t, Some(self.key), command);
        shared.settle(&mut t, self.key);
        result.map(drop)
    }

    /// `iw_cm_reject`: CONN_RECV → IDLE; the peer gets an MPA reply with R=1 carrying
    /// `private_data`. -ECONNRESET if the connection already died.
    pub fn reject(&self, private_data: &[u8]) -> Result<()> {
        let shared = &self.shared;
        let mut t = shared.lock_up()?;
        let entry = t.entry_mut(self.key)?;
        if entry.state != IdState::ConnRecv || entry.accepted || entry.call_in_flight {
            return Err(Errno::EINVAL);
        }
        let NicObject::Connection(conn) = entry.nic else {
            return Err(Errno::EINVAL);
        };
        // As in the kernel the id is IDLE whatever the NIC answers: no event follows.
        t.forget(self.key);
        if private_data.len() > MAX_PRIVATE_DATA {
            drop(t);
            shared.send_unwaited(Command::Release { conn });
            return Err(Errno::EINVAL);
        }
        let reject = Command::Reject { conn, private_data };
        let (t, result) = shared.execute(t, None, reject);
        drop(t);
        if let Some(release) = result
            .as_ref()
            .err()
            .and_then(|&e| release_after(reject, e))
        {
            shared.send_unwaited(release);
        }
        result.map(drop)
    }

    /// `iw_cm_disconnect`: ESTABLISHED → CLOSING (FIN, or RST when `abrupt`); in
    /// CONN_SENT it gives the attempt up (its CONNECT_REPLY reports -ECONNRESET);
    /// -EINVAL in LISTEN; a no-op in every other state. Waits first for an accept or
    /// connect in flight to settle and, after an accept, for its ESTABLISHED to be
    /// dispatched (the kernel's connect wait): a disconnect between the two acts on the
    /// established connection rather than finding it still CONN_RECV; -ETIMEDOUT, having
    /// done nothing, if it does not come within the command timeout.
    ///
    /// On the dispatch thread, which delivers that ESTABLISHED, waiting would deadlock
    /// (as it would in the kernel). There the disconnect is deferred: it returns 0 and is
    /// sent when the ESTABLISHED is dispatched, before its handler runs; abrupt if any of
    /// the disconnects asked for meanwhile was. Before the handler, because the
    /// application asked for it first: the ESTABLISHED handler finds the id CLOSING, as
    /// it may when a disconnect waiting on another thread goes ahead while that handler
    /// runs, and whatever the handler then does is CLOSING's ordinary business. The
    /// application sees ESTABLISHED, then CLOSE. If the id lets go of the connection
    /// first (destroyed, or a handler's non-zero return), nothing is sent.
    pub fn disconnect(&self, abrupt: bool) -> Result<()> {
        let shared = &self.shared;
        let mut t = shared.lock_up()?;
        t.entry_mut(self.key)?;
        // A call in flight ends within its own timeout; the ESTABLISHED after an accept
        // is waited for as long as a command's answer would be.
        t = shared.wait_while(t, |t| {
            !t.down && t.ids.get(&self.key).is_some_and(|e| e.call_in_flight)
        });
        if !t.on_dispatch_thread() {
            let awaiting_established = |t: &mut Table| {
                !t.down
                    && t.ids
                        .get(&self.key)
                        .is_some_and(|e| e.state == IdState::ConnRecv && e.accepted)
            };
            let (guard, _) = shared
                .changed
                .wait_timeout_while(t, shared.config.command_timeout, awaiting_established)
                .unwrap_or_else(|e| e.into_inner());
            t = guard;
            if awaiting_established(&mut t) {
                // The NIC never raised it: nothing was disconnected.
                return Err(Errno::ETIMEDOUT);
            }
        }
        if t.down {
            return Err(Errno::ENODEV);
        }
        let entry = t.entry_mut(self.key)?;
        let conn = match (entry.state, entry.nic) {
            (IdState::Listen, _) => return Err(Errno::EINVAL),
            (IdState::Established, NicObject::Connection(conn)) => {
                entry.state = IdState::Closing;
                conn
            }
            (IdState::ConnSent, NicObject::Connection(conn)) => conn,
            // Accepted and still waiting for ESTABLISHED: only on the dispatch thread.
            (IdState::ConnRecv, _) if entry.accepted => {
                // An abrupt ask wins over a graceful one, whichever came first.
                let abrupt = abrupt || entry.deferred_disconnect == Some(true);
                entry.deferred_disconnect = Some(abrupt);
                return Ok(());
            }
            _ => return Ok(()),
        };
        let (_t, result) = shared.execute(t, None, Command::Disconnect { conn, abrupt });
        result.map(drop)
    }

    /// `iw_cm_init_qp_attr`: the attributes to set for moving the QP to `qp_state`.
    pub fn init_qp_attr(&self, qp_state: QpState) -> Result<QpAttrUpdate> {
        let t = self.shared.lock_up()?;
        let entry = t.ids.get(&self.key).ok_or(Errno::EINVAL)?;
        match entry.state {
            IdState::Idle | IdState::ConnSent | IdState::ConnRecv | IdState::Established => {}
            _ => return Err(Errno::EINVAL),
        }
        match qp_state {
            QpState::Init | QpState::Rtr => Ok(QpAttrUpdate {
                mask: IB_QP_STATE | IB_QP_ACCESS_FLAGS,
                qp_access_flags: IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ,
            }),
            QpState::Rts => Ok(QpAttrUpdate {
                mask: 0,
                qp_access_flags: 0,
            }),
            _ => Err(Errno::EINVAL),
        }
    }

    /// `iw_destroy_cm_id`. Waits for an accept, connect or listen in flight; stops the
    /// listener, rejects an unanswered request, aborts a connection; drops the id's queued
    /// events; returns when no handler for the id runs or will run (rule 8).
    ///
    /// Called from a handler, it does not wait for the handler that called it (that would
    /// wait for itself): the id is gone when it returns, no later handler runs for it, and
    /// the calling handler's return value is ignored. Destroying an id already destroyed
    /// does nothing.
    pub fn destroy(self) {
        self.shared.destroy(self.key);
    }
}

/// Accept's and connect's checks of their parameters; the IRD and ORD as the record
/// carries them. Limits of the device itself are the NIC's to check.
fn check_param(param: &ConnParam, qp_known: bool) -> Result<(u16, u16)> {
    let ird = u16::try_from(param.ird).map_err(|_| Errno::EINVAL)?;
    let ord = u16::try_from(param.ord).map_err(|_| Errno::EINVAL)?;
    if !qp_known || param.private_data.len() > MAX_PRIVATE_DATA {
        return Err(Errno::EINVAL);
    }
    Ok((ird, ord))
}

fn endpoint(addr: SocketAddr) -> Endpoint {
    let ip = match addr.ip() {
        IpAddr::V4(ip) => host::IpAddr::V4(ip.octets()),
        IpAddr::V6(ip) => host::IpAddr::V6(ip.octets()),
    };
    Endpoint {
        addr: ip,
        port: addr.port(),
    }
}

fn socket_addr(endpoint: &Endpoint) -> SocketAddr {
    let ip = match endpoint.addr {
        host::IpAddr::V4(ip) => IpAddr::V4(Ipv4Addr::from(ip)),
        host::IpAddr::V6(ip) => IpAddr::V6(Ipv6Addr::from(ip)),
    };
    SocketAddr::new(ip, endpoint.port)
}

/// Any address and port of `remote`'s family.
fn unspecified(remote: &SocketAddr) -> SocketAddr {
    match remote {
        SocketAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        SocketAddr::V6(_) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
    }
}

impl Table {
    /// Whether the caller runs on the dispatch thread (in a handler): waiting there for
    /// what that thread delivers would deadlock.
    fn on_dispatch_thread(&self) -> bool {
        self.dispatch_thread == Some(thread::current().id())
    }

    fn insert_id(
        &mut self,
        max_ids: usize,
        handler: Handler,
        context: Context,
        state: IdState,
    ) -> Option<IdKey> {
        if self.ids.len() >= max_ids {
            return None;
        }
        let key = IdKey(self.next_key);
        self.next_key += 1;
        self.ids.insert(
            key,
            IdEntry {
                state,
                handler,
                context,
                local_addr: None,
                remote_addr: None,
                nic: NicObject::None,
                call_in_flight: false,
                accepted: false,
                deferred_disconnect: None,
                connect_sent: false,
            },
        );
        Some(key)
    }

    fn entry_mut(&mut self, key: IdKey) -> Result<&mut IdEntry> {
        self.ids.get_mut(&key).ok_or(Errno::EINVAL)
    }

    /// The id lets go of its NIC object and is IDLE: no event reaches it any more.
    fn forget(&mut self, key: IdKey) {
        let Some(entry) = self.ids.get_mut(&key) else {
            return;
        };
        match std::mem::replace(&mut entry.nic, NicObject::None) {
            NicObject::Connection(conn) => {
                self.by_conn.remove(&conn);
            }
            NicObject::Listener(listener) => {
                self.by_listener.remove(&listener);
            }
            NicObject::None => {}
        }
        entry.state = IdState::Idle;
        entry.accepted = false;
        // The connection a deferred disconnect was for is gone: nothing is sent.
        entry.deferred_disconnect = None;
    }

    fn new_tag(&mut self) -> u32 {
        let tag = self.next_tag;
        self.next_tag = self.next_tag.wrapping_add(1);
        tag
    }

    /// `key` holds `object` from now on: the events naming it reach `key`. The caller
    /// made sure no other id holds it ([`Table::handle_in_use`]).
    fn attach(&mut self, key: IdKey, object: NicObject) {
        match object {
            NicObject::Listener(listener) => {
                self.by_listener.insert(listener, key);
            }
            NicObject::Connection(conn) => {
                self.by_conn.insert(conn, key);
            }
            NicObject::None => {}
        }
        if let Some(entry) = self.ids.get_mut(&key) {
            entry.nic = object;
        }
    }

    /// Whether another id still holds the handle of `object`, which the NIC just named as
    /// new (`named_by` says where): then the NIC gave the handle out twice, a protocol
    /// break, counted and logged here. Every path that takes a new handle asks this one
    /// check. The holder keeps its handle: giving it to the newcomer would orphan the
    /// holder (its events, CLOSE included, would reach the newcomer), and ending the
    /// newcomer's object (an Unlisten, Release or Reject naming the handle) would end the
    /// holder's, which the NIC cannot tell apart from it. So the newcomer is refused with
    /// nothing sent: a Listen or Connect fails, a late success is not undone, a
    /// CONNECT_REQUEST is dropped.
    fn handle_in_use(&mut self, object: NicObject, named_by: impl std::fmt::Debug) -> bool {
        let holder = match object {
            NicObject::Listener(listener) => self.by_listener.get(&listener),
            NicObject::Connection(conn) => self.by_conn.get(&conn),
            NicObject::None => None,
        };
        let Some(&holder) = holder else {
            return false;
        };
        self.stats.duplicate_handles += 1;
        tracing::error!(
            ?object,
            %holder,
            ?named_by,
            "the NIC gave out a handle an id still holds: the holder keeps it"
        );
        true
    }

    /// Apply a completion's effect on its id, so the events behind it find the id ready.
    /// Returns a command that undoes a late success nobody waits for.
    fn complete(&mut self, completion: Completion) -> Option<Command<'static>> {
        let Some(pending) = self.pending.get(&completion.tag) else {
            self.stats.unmatched_completions += 1;
            tracing::error!(tag = completion.tag, "completion for no command");
            return None;
        };
        let (kind, id, abandoned) = (pending.kind, pending.id, pending.abandoned);
        // What a successful Listen or Connect made on the NIC.
        let created = match (kind, completion.status) {
            (CommandKind::Listen, 0) => NicObject::Listener(completion.handle),
            (CommandKind::Connect, 0) => NicObject::Connection(completion.handle),
            _ => NicObject::None,
        };
        let duplicate = self.handle_in_use(created, kind);
        if abandoned {
            self.pending.remove(&completion.tag);
            if duplicate {
                return None; // the holder's: undoing it would end the holder's object
            }
            let undo = match created {
                NicObject::Listener(listener) => Command::Unlisten { listener },
                NicObject::Connection(conn) => Command::Release { conn },
                NicObject::None => return None,
            };
            self.stats.orphans_released += 1;
            tracing::warn!(?undo, "NIC completed a call that had timed out: undoing it");
            return Some(undo);
        }
        // A duplicate handle fails the call with -EIO: the call was sound and the NIC
        // broke its protocol, which is what the kernel's drivers answer a device's
        // nonsensical reply with (-EADDRINUSE or -EBUSY would blame the request). The id
        // then goes IDLE as after any failed listen or connect.
        let status = if duplicate { -EIO } else { completion.status };
        let pending = self.pending.get_mut(&completion.tag)?;
        pending.completion = Some(Completion {
            status,
            ..completion
        });
        let key = id?;
        let entry = self.ids.get_mut(&key)?;
        match (kind, status) {
            (CommandKind::Listen | CommandKind::Connect, 0) => self.attach(key, created),
            (CommandKind::Accept, 0) => entry.accepted = true,
            (CommandKind::Listen | CommandKind::Connect | CommandKind::Accept, _) => {
                self.forget(key)
            }
            _ => {}
        }
        None
    }

    /// Give up waiting for `tag`: the call failed with `errno`. Returns the command that
    /// makes the NIC forget what the call may have left behind.
    fn abandon(&mut self, tag: u32, errno: Errno) -> Option<Command<'static>> {
        let pending = self.pending.get_mut(&tag)?;
        pending.abandoned = true;
        let (kind, id) = (pending.kind, pending.id);
        tracing::warn!(tag, ?kind, %errno, "command abandoned");
        let key = id?;
        let conn = match self.ids.get(&key)?.nic {
            NicObject::Connection(conn) => Some(conn),
            _ => None,
        };
        match kind {
            CommandKind::Listen | CommandKind::Connect => {
                self.forget(key);
                None
            }
            CommandKind::Accept => {
                self.forget(key);
                conn.map(|conn| Command::Release { conn })
            }
            _ => None,
        }
    }

    /// Check an event's sequence number; `false` for a duplicate, which is dropped.
    fn check_seq(&mut self, seq: u32) -> bool {
        let expected = self.next_seq;
        let ahead = seq.wrapping_sub(expected) as i32;
        if ahead < 0 {
            self.stats.seq_duplicates += 1;
            tracing::error!(seq, expected, "duplicate event sequence number: dropped");
            return false;
        }
        if ahead > 0 {
            self.stats.seq_gaps += 1;
            tracing::error!(seq, expected, lost = ahead, "gap in event sequence numbers");
        }
        self.next_seq = seq.wrapping_add(1);
        true
    }
}

/// What the dispatcher does with one queued event.
enum Delivery {
    /// Run `handler` for `id`, after sending `deferred_disconnect`.
    Handler {
        id: IdKey,
        listener: Option<IdKey>,
        handler: Handler,
        event: CmEvent,
        deferred_disconnect: Option<Command<'static>>,
    },
    /// Nothing to run; maybe a command to send (a request nobody can take is rejected).
    Nothing(Option<Command<'static>>),
}

/// The release owed after `command` failed with `errno`: a reject that failed but for the
/// connection being gone (-ECONNRESET) leaves the NIC's connection to release, so it holds
/// nothing for an id that is gone. Sent by whoever failed, after the table is unlocked.
fn release_after(command: Command<'_>, errno: Errno) -> Option<Command<'static>> {
    match command {
        Command::Reject { conn, .. } if errno != Errno::ECONNRESET => {
            Some(Command::Release { conn })
        }
        _ => None,
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The table, or -ENODEV if the device is down.
    fn lock_up(&self) -> Result<MutexGuard<'_, Table>> {
        let t = self.lock();
        if t.down {
            return Err(Errno::ENODEV);
        }
        Ok(t)
    }

    fn wait_while<'a>(
        &'a self,
        guard: MutexGuard<'a, Table>,
        condition: impl FnMut(&mut Table) -> bool,
    ) -> MutexGuard<'a, Table> {
        self.changed
            .wait_while(guard, condition)
            .unwrap_or_else(|e| e.into_inner())
    }

    fn id(self: &Arc<Self>, key: IdKey) -> CmId {
        CmId {
            shared: Arc::clone(self),
            key,
        }
    }

    fn with_idle_entry(&self, key: IdKey, update: impl FnOnce(&mut IdEntry)) -> Result<()> {
        let mut t = self.lock_up()?;
        let entry = t.entry_mut(key)?;
        if entry.state != IdState::Idle {
            return Err(Errno::EINVAL);
        }
        update(entry);
        Ok(())
    }

    /// A call in flight on `key` has its answer: wake whoever waits for it to settle.
    fn settle(&self, t: &mut Table, key: IdKey) {
        if let Some(entry) = t.ids.get_mut(&key) {
            entry.call_in_flight = false;
        }
        self.changed.notify_all();
    }

    /// Send `command` and wait for its completion (or the timeout, or the link going
    /// down). The completion's effect on the id is applied by the receive thread.
    fn execute<'a>(
        &'a self,
        mut t: MutexGuard<'a, Table>,
        id: Option<IdKey>,
        command: Command<'_>,
    ) -> (MutexGuard<'a, Table>, Result<Completion>) {
        let tag = t.new_tag();
        t.pending.insert(
            tag,
            Pending {
                id,
                kind: command.kind(),
                completion: None,
                abandoned: false,
            },
        );
        drop(t);
        let sent = self.send(tag, command);
        let mut t = self.lock();
        let deadline = Instant::now() + self.config.command_timeout;
        let outcome = loop {
            // The answer first: once the receive thread applied it, events may have
            // followed (an accept's ESTABLISHED), so the call must not report -ENODEV
            // for a device that went down after (rule 3).
            if let Some(completion) = t.pending.get(&tag).and_then(|p| p.completion) {
                break Ok(completion);
            }
            if sent.is_err() || t.down {
                break Err(Errno::ENODEV);
            }
            let now = Instant::now();
            if now >= deadline {
                break Err(Errno::ETIMEDOUT);
            }
            t = self
                .changed
                .wait_timeout(t, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        };
        match outcome {
            Ok(completion) => {
                t.pending.remove(&tag);
                let result = match Errno::from_status(completion.status) {
                    Some(errno) => Err(errno),
                    None => Ok(completion),
                };
                (t, result)
            }
            Err(errno) => {
                let cleanup = t.abandon(tag, errno);
                drop(t);
                if let Some(cleanup) = cleanup {
                    self.send_unwaited(cleanup);
                }
                (self.lock(), Err(errno))
            }
        }
    }

    fn send(&self, tag: u32, command: Command<'_>) -> std::result::Result<(), TransportError> {
        let record = CommandRecord { tag, command };
        let mut bytes = vec![0; record.buffer_len()];
        // Every field was checked against the record's limits before getting here.
        let len = record
            .emit(&mut bytes)
            .expect("command fields within the record's limits");
        self.transport.send_command(&bytes[..len])
    }

    /// Send a command whose answer nobody waits for (a cleanup). Its completion is
    /// matched and discarded by the receive thread.
    fn send_unwaited(&self, command: Command<'_>) {
        let tag = {
            let mut t = self.lock();
            let tag = t.new_tag();
            t.pending.insert(
                tag,
                Pending {
                    id: None,
                    kind: command.kind(),
                    completion: None,
                    abandoned: true,
                },
            );
            tag
        };
        if let Err(error) = self.send(tag, command) {
            tracing::warn!(?command, %error, "cleanup command not sent");
            self.lock().pending.remove(&tag);
        }
    }

    fn destroy(&self, key: IdKey) {
        // Rule 8: a listen, accept or connect in flight settles first. Its completion comes
        // from the receive thread, so this wait is safe on every thread.
        let mut t = self.wait_while(self.lock(), |t| {
            t.ids.get(&key).is_some_and(|e| e.call_in_flight)
        });
        let Some(entry) = t.ids.get_mut(&key) else {
            return; // destroyed already
        };
        if entry.state == IdState::Destroying {
            // Another caller is destroying it. It waits for the handler we may be running
            // in; elsewhere, wait for it to finish so the promise of rule 8 holds here too.
            if !t.on_dispatch_thread() {
                drop(self.wait_while(t, |t| t.ids.contains_key(&key)));
            }
            return;
        }
        let teardown = match (entry.state, entry.nic) {
            (IdState::Listen, NicObject::Listener(listener)) => {
                Some(Command::Unlisten { listener })
            }
            (IdState::ConnRecv, NicObject::Connection(conn)) if !entry.accepted => {
                Some(Command::Reject {
                    conn,
                    private_data: &[],
                })
            }
            (_, NicObject::Connection(conn)) => Some(Command::Release { conn }),
            _ => None,
        };
        t.forget(key);
        if let Some(entry) = t.ids.get_mut(&key) {
            entry.state = IdState::Destroying;
        }
        let mut release = None;
        if let Some(command) = teardown {
            let (guard, result) = self.execute(t, None, command);
            t = guard;
            if let Err(errno) = result {
                tracing::warn!(%key, ?command, %errno, "teardown during destroy failed");
                release = release_after(command, errno);
            }
        }
        if !t.on_dispatch_thread() {
            t = self.wait_while(t, |t| t.running.is_some_and(|r| r.involves(key)));
        }
        t.ids.remove(&key);
        drop(t);
        self.changed.notify_all();
        if let Some(release) = release {
            self.send_unwaited(release);
        }
    }

    fn receive_loop(&self) {
        loop {
            match self.transport.receive_record(RECEIVE_POLL) {
                Ok(bytes) => self.on_record(&bytes),
                Err(TransportError::Timeout) => {
                    if self.lock().down {
                        return;
                    }
                }
                Err(TransportError::Closed) => {
                    let mut t = self.lock();
                    if !t.down {
                        tracing::error!("link to the NIC closed: device down");
                        t.down = true;
                    }
                    drop(t);
                    self.changed.notify_all();
                    return;
                }
            }
        }
    }

    fn on_record(&self, bytes: &[u8]) {
        let mut t = self.lock();
        match Record::parse(bytes) {
            Ok(Record::Completion(completion)) => {
                let undo = t.complete(completion);
                drop(t);
                self.changed.notify_all();
                if let Some(undo) = undo {
                    self.send_unwaited(undo);
                }
            }
            Ok(Record::Event(event)) => {
                if t.check_seq(event.seq) {
                    t.events.push_back(QueuedEvent {
                        kind: event.kind,
                        conn: event.conn,
                        listener: event.listener,
                        status: event.status,
                        local: socket_addr(&event.local),
                        remote: socket_addr(&event.remote),
                        ird: event.ird,
                        ord: event.ord,
                        rtr: event.rtr,
                        private_data: event.private_data.to_vec(),
                    });
                    drop(t);
                    self.changed.notify_all();
                }
            }
            Ok(Record::Command(_)) | Err(_) => {
                t.stats.malformed_records += 1;
                tracing::error!(
                    len = bytes.len(),
                    "record from the NIC not a completion or event"
                );
            }
        }
    }

    fn dispatch_loop(self: Arc<Self>) {
        loop {
            let mut t = self.wait_while(self.lock(), |t| t.events.is_empty() && !t.down);
            if t.down {
                return;
            }
            let Some(event) = t.events.pop_front() else {
                continue;
            };
            match self.route(&mut t, event) {
                Delivery::Nothing(command) => {
                    drop(t);
                    if let Some(command) = command {
                        self.send_unwaited(command);
                    }
                }
                Delivery::Handler {
                    id,
                    listener,
                    handler,
                    event,
                    deferred_disconnect,
                } => {
                    // Running from here on, so a destroy elsewhere waits for the handler
                    // even while the deferred disconnect is answered.
                    t.running = Some(Running { id, listener });
                    drop(t);
                    // The event may have moved the id on (ESTABLISHED after an accept):
                    // a disconnect waiting for that goes ahead while the handler runs.
                    self.changed.notify_all();
                    if let Some(disconnect) = deferred_disconnect {
                        let (t, result) = self.execute(self.lock(), None, disconnect);
                        drop(t);
                        if let Err(errno) = result {
                            // Its caller got 0 long ago; the CLOSE still ends the id.
                            tracing::warn!(%id, ?disconnect, %errno, "deferred disconnect failed");
                        }
                    }
                    let cm_id = self.id(id);
                    let outcome = catch_unwind(AssertUnwindSafe(|| handler(&cm_id, &event)))
                        .unwrap_or_else(|_| {
                            self.lock().stats.handler_panics += 1;
                            tracing::error!(%id, ?event.event, "handler panicked");
                            Err(Errno::EINVAL)
                        });
                    self.lock().running = None;
                    self.changed.notify_all();
                    match outcome {
                        Err(errno) => self.handler_failed(id, event.event, errno),
                        Ok(()) if event.event == EventKind::ConnectRequest => {
                            self.request_delivered(id)
                        }
                        Ok(()) => {}
                    }
                }
            }
        }
    }

    /// Rule 10: the backlog bounds requests not yet delivered. A CONNECT_REQUEST handler
    /// returned without answering (the application keeps the child for later): the NIC
    /// learns the request was delivered, so it leaves the listener's backlog. One answered
    /// in its handler, or on the way (an accept in flight on another thread), needs none.
    fn request_delivered(&self, key: IdKey) {
        let t = self.lock();
        let conn = match t.ids.get(&key) {
            Some(IdEntry {
                state: IdState::ConnRecv,
                accepted: false,
                call_in_flight: false,
                nic: NicObject::Connection(conn),
                ..
            }) => *conn,
            _ => return,
        };
        drop(t);
        self.send_unwaited(Command::Delivered { conn });
    }

    /// Rule 7: a handler returned non-zero. On CONNECT_REQUEST the child is rejected (if
    /// the handler did not answer it) and destroyed; otherwise the id is destroyed.
    fn handler_failed(&self, key: IdKey, kind: EventKind, errno: Errno) {
        tracing::debug!(%key, ?kind, %errno, "handler returned non-zero: destroying the id");
        let t = self.lock();
        let Some(entry) = t.ids.get(&key) else {
            return; // the handler destroyed its id itself
        };
        if entry.state == IdState::Destroying {
            return; // someone else is destroying it
        }
        drop(t);
        // `destroy` rejects a CONN_RECV id not yet accepted, which is exactly rule 7's
        // "the child is rejected and destroyed".
        self.destroy(key);
    }

    /// Decide what a queued event means: its id, its state transition, what the handler
    /// sees.
    fn route(self: &Arc<Self>, t: &mut Table, event: QueuedEvent) -> Delivery {
        let QueuedEvent {
            kind,
            conn,
            listener,
            status,
            local,
            remote,
            ird,
            ord,
            rtr,
            private_data,
        } = event;
        let mut delivered = CmEvent {
            event: kind,
            status,
            local_addr: local,
            remote_addr: remote,
            private_data,
            ird: u32::from(ird),
            ord: u32::from(ord),
            rtr,
        };
        if kind == EventKind::ConnectRequest {
            return self.route_connect_request(t, conn, listener, delivered);
        }
        let Some(&key) = t.by_conn.get(&conn) else {
            t.stats.events_for_forgotten_connections += 1;
            tracing::debug!(conn, ?kind, "event for a connection no id holds: dropped");
            return Delivery::Nothing(None);
        };
        let Some(entry) = t.ids.get_mut(&key) else {
            return Delivery::Nothing(None);
        };
        // Rule 9: the API's CONNECT_REPLY and ESTABLISHED carry local ORD in `ird`.
        (delivered.ird, delivered.ord) = (delivered.ord, delivered.ird);
        let mut deferred_disconnect = None;
        // (deliver to the handler, the id lets go of its connection)
        let (deliver, ends) = match (kind, entry.state) {
            (EventKind::ConnectReply, IdState::ConnSent) => {
                entry.local_addr = Some(local);
                entry.remote_addr = Some(remote);
                if status == 0 {
                    entry.state = IdState::Established;
                }
                (true, status != 0)
            }
            (EventKind::Established, IdState::ConnRecv) if entry.accepted => {
                entry.accepted = false;
                entry.state = match entry.deferred_disconnect.take() {
                    Some(abrupt) => {
                        deferred_disconnect = Some(Command::Disconnect { conn, abrupt });
                        IdState::Closing
                    }
                    None => IdState::Established,
                };
                (true, false)
            }
            (EventKind::Disconnect, IdState::Established) => {
                entry.state = IdState::Closing;
                (false, false)
            }
            // The peer's FIN after our own disconnect: nothing changes.
            (EventKind::Disconnect, IdState::Closing) => (false, false),
            (EventKind::Close, IdState::Established | IdState::Closing) => {
                // CLOSE reports no IRD/ORD (the kernel's providers leave them 0).
                (delivered.ird, delivered.ord) = (0, 0);
                (true, true)
            }
            (kind, state) => {
                t.stats.unexpected_events += 1;
                tracing::error!(%key, ?kind, ?state, conn, "event the id's state does not allow: dropped");
                (false, false)
            }
        };
        if ends {
            t.forget(key);
        }
        if !deliver {
            return Delivery::Nothing(None);
        }
        let handler = Arc::clone(&t.ids[&key].handler);
        Delivery::Handler {
            id: key,
            listener: None,
            handler,
            event: delivered,
            deferred_disconnect,
        }
    }

    /// A new child id in CONN_RECV with its listener's handler and context. A request no
    /// listener can take (destroyed, or the id table full) is rejected.
    fn route_connect_request(
        self: &Arc<Self>,
        t: &mut Table,
        conn: u32,
        listener: u32,
        event: CmEvent,
    ) -> Delivery {
        let reject = Delivery::Nothing(Some(Command::Reject {
            conn,
            private_data: &[],
        }));
        if t.handle_in_use(NicObject::Connection(conn), EventKind::ConnectRequest) {
            return Delivery::Nothing(None);
        }
        let Some(&listener_key) = t.by_listener.get(&listener) else {
            tracing::debug!(conn, listener, "request for a listener gone: rejected");
            return reject;
        };
        let listening = &t.ids[&listener_key];
        let (handler, context) = (
            Arc::clone(&listening.handler),
            Arc::clone(&listening.context),
        );
        let Some(child) = t.insert_id(
            self.config.max_ids,
            Arc::clone(&handler),
            context,
            IdState::ConnRecv,
        ) else {
            tracing::warn!(conn, "id table full: connect request rejected");
            return reject;
        };
        let entry = t.ids.get_mut(&child).expect("just inserted");
        entry.local_addr = Some(event.local_addr);
        entry.remote_addr = Some(event.remote_addr);
        t.attach(child, NicObject::Connection(conn));
        Delivery::Handler {
            id: child,
            listener: Some(listener_key),
            handler,
            event,
            deferred_disconnect: None,
        }
    }
}
