//! The C ABI's own argument handling, driven from Rust against the in-process NIC: what
//! the C example program (c_example.rs) does not reach.
#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use iwnic_host_driver::ffi::*;
use iwnic_proto::host::{
    Command, CommandKind, CommandRecord, Completion, Endpoint, Event, EventKind,
};
use iwnic_proto::mpa::RtrTypes;

const LISTENER: u32 = 0x0001_0001;
const CONN: u32 = 0x0001_0002;
const QPN: u32 = 7;
const EINVAL: c_int = -22;

/// The CONNECT_REQUEST handler's child id.
static CHILD: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn keep_child(id: *mut IwCmId, event: *mut IwCmEvent) -> c_int {
    // SAFETY: the driver hands the handler a valid event.
    if unsafe { (*event).event } == EventKind::ConnectRequest as c_int {
        CHILD.store(id as usize, Ordering::SeqCst);
    }
    0
}

/// `record_rtr`'s child id, and the `iwnic_rtr` of the ESTABLISHED it saw plus one (0:
/// none yet).
static RTR_CHILD: AtomicUsize = AtomicUsize::new(0);
static ESTABLISHED_RTR: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn record_rtr(id: *mut IwCmId, event: *mut IwCmEvent) -> c_int {
    // SAFETY: the driver hands the handler a valid event.
    let event = unsafe { &*event };
    if event.event == EventKind::ConnectRequest as c_int {
        RTR_CHILD.store(id as usize, Ordering::SeqCst);
    } else if event.event == EventKind::Established as c_int {
        ESTABLISHED_RTR.store(usize::from(event.iwnic_rtr) + 1, Ordering::SeqCst);
    }
    0
}

/// Wait until `value` is not 0, and return it.
fn wait_set(value: &AtomicUsize, what: &str) -> usize {
    let start = Instant::now();
    loop {
        match value.load(Ordering::SeqCst) {
            0 => assert!(start.elapsed() < Duration::from_secs(10), "no {what}"),
            set => return set,
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// An event of connection `CONN` from the NIC, as its firmware raises them.
fn push_event(nic: *const IwnicNic, seq: u32, kind: EventKind, listener: u32, rtr: RtrTypes) {
    let event = Event {
        seq,
        kind,
        conn: CONN,
        listener,
        status: 0,
        local: Endpoint::v4([10, 0, 0, 1], 4791),
        remote: Endpoint::v4([10, 0, 0, 2], 50000),
        ird: 1,
        ord: 1,
        rtr,
        private_data: &[],
    };
    let mut record = vec![0u8; event.buffer_len()];
    event.emit(&mut record).unwrap();
    push(nic, &record);
}

/// What the tests accept with: no private data, IRD and ORD 1, the registered QP.
const CONN_PARAM: IwCmConnParam = IwCmConnParam {
    private_data: ptr::null::<c_void>(),
    private_data_len: 0,
    ord: 1,
    ird: 1,
    qpn: QPN,
};

fn push(nic: *const IwnicNic, record: &[u8]) {
    // SAFETY: `nic` is live until the test frees it, `record` readable.
    unsafe { iwnic_nic_push_record(nic, record.as_ptr().cast(), record.len()) };
}

/// The NIC's side: completes every command with success (listen with `LISTENER`) and
/// records what it was sent, until the device closes.
fn serve(nic: usize, seen: Arc<Mutex<Vec<(CommandKind, u32)>>>) {
    let mut buf = vec![0u8; 1024];
    loop {
        // SAFETY: `nic` is live until the test frees it, after this thread ends.
        let n = unsafe {
            iwnic_nic_wait_command(nic as *mut IwnicNic, buf.as_mut_ptr().cast(), buf.len(), 50)
        };
        if n < 0 {
            return;
        }
        let Ok(record) = CommandRecord::parse(&buf[..n as usize]) else {
            continue;
        };
        let handle = match record.command {
            Command::Listen { .. } => LISTENER,
            Command::Accept { conn, .. }
            | Command::Release { conn }
            | Command::Reject { conn, .. } => conn,
            _ => 0,
        };
        seen.lock().unwrap().push((record.command.kind(), handle));
        let completion = Completion {
            tag: record.tag,
            status: 0,
            handle,
        };
        let mut out = [0u8; 16];
        completion.emit(&mut out).unwrap();
        push(nic as *const IwnicNic, &out);
    }
}

/// A device on the in-process NIC (served by `serve`), listening with `handler`, and a
/// CONNECT_REQUEST for connection `CONN` on its way.
struct Fixture {
    dev: *mut IbDevice,
    nic: *mut IwnicNic,
    listener: *mut IwCmId,
    seen: Arc<Mutex<Vec<(CommandKind, u32)>>>,
    server: Option<std::thread::JoinHandle<()>>,
}

impl Fixture {
    fn listening(handler: IwCmHandler) -> Fixture {
        let (mut dev, mut nic) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: valid out-pointers.
        assert_eq!(unsafe { iwnic_open_inprocess(0, &mut dev, &mut nic) }, 0);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let server = {
            let (nic, seen) = (nic as usize, Arc::clone(&seen));
            std::thread::spawn(move || serve(nic, seen))
        };
        // SAFETY: the driver's own pointers, live until `drop`.
        let listener = unsafe {
            iwnic_register_qp(dev, QPN);
            let listener = iw_create_cm_id(dev, handler, ptr::null_mut());
            let sin = &mut *ptr::addr_of_mut!((*listener).local_addr).cast::<libc::sockaddr_in>();
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = 4791u16.to_be();
            sin.sin_addr.s_addr = u32::from_ne_bytes([10, 0, 0, 1]);
            assert_eq!(iw_cm_listen(listener, 8), 0);
            listener
        };
        push_event(nic, 1, EventKind::ConnectRequest, LISTENER, RtrTypes::NONE);
        Fixture {
            dev,
            nic,
            listener,
            seen,
            server: Some(server),
        }
    }

    /// Wait until the NIC has been sent `command`.
    fn wait_for(&self, command: (CommandKind, u32)) {
        let start = Instant::now();
        while !self.seen.lock().unwrap().contains(&command) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "no {command:?}: {:?}",
                self.seen
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn saw(&self, kind: CommandKind) -> bool {
        self.seen.lock().unwrap().iter().any(|&(k, _)| k == kind)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // SAFETY: the listener and device are live; the NIC is freed once its server ends.
        unsafe {
            iw_destroy_cm_id(self.listener);
            iwnic_close(self.dev);
        }
        if let Some(server) = self.server.take() {
            let _ = server.join();
        }
        // SAFETY: the device is closed and the serving thread has ended.
        unsafe { iwnic_nic_free(self.nic) };
    }
}

/// `iw_cm_accept` with a conn_param it cannot read (a null one here; more private data
/// than MPA carries takes the same path) fails as an accept with bad parameters does:
/// the connection ends (the NIC is told to release it) and the id cannot be accepted
/// again.
#[test]
fn an_accept_with_an_unreadable_conn_param_ends_the_connection() {
    let fixture = Fixture::listening(Some(keep_child));
    let start = Instant::now();
    while CHILD.load(Ordering::SeqCst) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no CONNECT_REQUEST"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let child = CHILD.load(Ordering::SeqCst) as *mut IwCmId;
    let good = CONN_PARAM;
    // SAFETY: the child is live until destroyed below.
    unsafe {
        assert_eq!(iw_cm_accept(child, ptr::null()), EINVAL);
        assert_eq!(
            iw_cm_accept(child, &good),
            EINVAL,
            "the id is no longer CONN_RECV"
        );
    }
    fixture.wait_for((CommandKind::Release, CONN));
    assert!(
        !fixture.saw(CommandKind::Accept),
        "no Accept reaches the NIC"
    );
    // SAFETY: as above.
    unsafe { iw_destroy_cm_id(child) };
}

/// A listener created without a handler has nobody to give a request to: the request is
/// rejected (as a handler's non-zero return) rather than left to a child nobody can
/// reach.
/// ESTABLISHED tells the C handler which RTR began FPDU mode, in `iwnic_rtr` (a field
/// past the kernel's), as the NIC sent or took it.
#[test]
fn established_tells_the_c_handler_the_rtr_in_iwnic_rtr() {
    let fixture = Fixture::listening(Some(record_rtr));
    let child = wait_set(&RTR_CHILD, "CONNECT_REQUEST") as *mut IwCmId;
    // SAFETY: the child is live until destroyed below.
    assert_eq!(unsafe { iw_cm_accept(child, &CONN_PARAM) }, 0);
    push_event(fixture.nic, 2, EventKind::Established, 0, RtrTypes::READ);
    let seen = wait_set(&ESTABLISHED_RTR, "ESTABLISHED") - 1;
    assert_eq!(seen, usize::from(IWNIC_RTR_READ));
    // SAFETY: as above.
    unsafe { iw_destroy_cm_id(child) };
}

#[test]
fn a_request_to_a_listener_without_a_handler_is_rejected() {
    let fixture = Fixture::listening(None);
    fixture.wait_for((CommandKind::Reject, CONN));
}
