//! The C ABI: the kernel's iw_cm names, argument order and field widths, declared in
//! `include/iw_cm.h`.
//!
//! A C id (`struct iw_cm_id`) is a heap box whose first part is the public struct and
//! whose second is the Rust [`CmId`]. The Rust id's context points back at the box, so
//! the handler shim finds the C struct for every event. A listener's child gets its own
//! box when its CONNECT_REQUEST is delivered, with the listener's handler and context,
//! as the kernel gives them.
//!
//! Ownership: `iw_destroy_cm_id` frees the box. An id the driver destroys because its
//! handler returned non-zero (rule 7) is freed by the driver after the handler returns;
//! the application must not destroy it again (as in the kernel).
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_long, c_uint, c_void};
use std::mem::size_of;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;
use std::time::Duration;

use libc::{sa_family_t, sockaddr_in, sockaddr_in6, sockaddr_storage, AF_INET, AF_INET6};

use crate::cm::{CmEvent, ConnParam, EventKind, QpState, RtrTypes, MAX_PRIVATE_DATA};
use crate::device::{CmId, Device};
use crate::errno::{status_of, Errno, EMSGSIZE, ENODEV};
use crate::in_process::{in_process, InProcessNic, DEFAULT_HOST_QUEUE_CAPACITY};
use crate::transport::TransportError;

/// `iw_cm_handler`.
pub type IwCmHandler = Option<unsafe extern "C" fn(*mut IwCmId, *mut IwCmEvent) -> c_int>;

/// `struct iw_cm_id`: the fields the kernel's clients use.
#[repr(C)]
pub struct IwCmId {
    pub cm_handler: IwCmHandler,
    pub context: *mut c_void,
    pub device: *mut IbDevice,
    /// Set before `iw_cm_listen` (required) and `iw_cm_connect` (optional); the driver
    /// fills in a connection's real addresses.
    pub local_addr: sockaddr_storage,
    /// Set before `iw_cm_connect`.
    pub remote_addr: sockaddr_storage,
}

/// `struct iw_cm_event`, with the kernel's field widths: private data beyond 255 bytes is
/// cut, IRD/ORD beyond 255 read 255. One field past the kernel's: `iwnic_rtr`.
#[repr(C)]
pub struct IwCmEvent {
    pub event: c_int,
    pub status: c_int,
    pub local_addr: sockaddr_storage,
    pub remote_addr: sockaddr_storage,
    pub private_data: *const c_void,
    pub provider_data: *mut c_void,
    pub private_data_len: u8,
    pub ord: u8,
    pub ird: u8,
    /// [`CmEvent::rtr`]: `IWNIC_RTR_SEND`, `IWNIC_RTR_WRITE`, `IWNIC_RTR_READ` or 0.
    pub iwnic_rtr: u8,
}

/// `iwnic_rtr` of [`IwCmEvent`] (the host-interface record's flags number them alike).
pub const IWNIC_RTR_SEND: u8 = 0x01;
pub const IWNIC_RTR_WRITE: u8 = 0x02;
pub const IWNIC_RTR_READ: u8 = 0x04;

/// The `iwnic_rtr` value of an event naming `rtr` (one type, or none).
fn c_rtr(rtr: RtrTypes) -> u8 {
    match (rtr.send, rtr.write, rtr.read) {
        (true, false, false) => IWNIC_RTR_SEND,
        (false, true, false) => IWNIC_RTR_WRITE,
        (false, false, true) => IWNIC_RTR_READ,
        _ => 0,
    }
}

/// `struct iw_cm_conn_param`.
#[repr(C)]
pub struct IwCmConnParam {
    pub private_data: *const c_void,
    pub private_data_len: u16,
    pub ord: u32,
    pub ird: u32,
    pub qpn: u32,
}

/// `struct ib_qp_attr`: the two fields iw_cm reads and writes.
#[repr(C)]
pub struct IbQpAttr {
    pub qp_state: c_int,
    pub qp_access_flags: c_int,
}

/// `struct ib_device`: an opened iwnic device.
pub struct IbDevice {
    device: Device,
}

/// `struct iwnic_nic`: the NIC end of an in-process link.
pub struct IwnicNic {
    nic: InProcessNic,
}

/// The box behind a `struct iw_cm_id *`.
#[repr(C)]
struct IdBox {
    public: IwCmId,
    id: CmId,
}

/// The Rust context of a C id: where its box is.
struct BoxLink(AtomicPtr<IdBox>);

fn err_ptr(errno: Errno) -> *mut IwCmId {
    // The kernel's ERR_PTR: the negative errno as an address.
    errno.get() as isize as *mut IwCmId
}

fn empty_sockaddr() -> sockaddr_storage {
    // SAFETY: sockaddr_storage is plain bytes; all-zero is AF_UNSPEC.
    unsafe { std::mem::zeroed() }
}

fn to_sockaddr(addr: &SocketAddr) -> sockaddr_storage {
    let mut storage = empty_sockaddr();
    match addr {
        SocketAddr::V4(a) => {
            let sin = sockaddr_in {
                sin_family: AF_INET as sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is large and aligned enough for every sockaddr.
            unsafe { ptr::write(ptr::addr_of_mut!(storage).cast::<sockaddr_in>(), sin) };
        }
        SocketAddr::V6(a) => {
            let sin6 = sockaddr_in6 {
                sin6_family: AF_INET6 as sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above.
            unsafe { ptr::write(ptr::addr_of_mut!(storage).cast::<sockaddr_in6>(), sin6) };
        }
    }
    storage
}

/// The address in `storage`; `None` for AF_UNSPEC, `Err` for another family.
fn from_sockaddr(storage: &sockaddr_storage) -> Result<Option<SocketAddr>, Errno> {
    match c_int::from(storage.ss_family) {
        0 => Ok(None),
        AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let sin = unsafe { &*ptr::from_ref(storage).cast::<sockaddr_in>() };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Ok(Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            ))))
        }
        AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let sin6 = unsafe { &*ptr::from_ref(storage).cast::<sockaddr_in6>() };
            Ok(Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            ))))
        }
        _ => Err(Errno::EINVAL),
    }
}

/// Box a C id for `id` and point its Rust context at the box.
fn new_box(
    id: CmId,
    handler: IwCmHandler,
    context: *mut c_void,
    device: *mut IbDevice,
) -> *mut IdBox {
    let public = IwCmId {
        cm_handler: handler,
        context,
        device,
        local_addr: id
            .local_addr()
            .as_ref()
            .map_or_else(empty_sockaddr, to_sockaddr),
        remote_addr: id
            .remote_addr()
            .as_ref()
            .map_or_else(empty_sockaddr, to_sockaddr),
    };
    let raw = Box::into_raw(Box::new(IdBox {
        public,
        id: id.clone(),
    }));
    // Cannot fail: the id was just created or delivered and is alive.
    let _ = id.set_context(Arc::new(BoxLink(AtomicPtr::new(raw))));
    raw
}

fn box_of(id: &CmId) -> Option<*mut IdBox> {
    let context = id.context()?;
    let link = context.downcast_ref::<BoxLink>()?;
    Some(link.0.load(Ordering::Acquire))
}

/// The Rust handler of every C id: finds (or, for a new child, makes) the C id, builds
/// the C event and calls the application's handler.
fn shim(id: &CmId, event: &CmEvent) -> crate::Result<()> {
    let Some(mut target) = box_of(id) else {
        return Err(Errno::EINVAL);
    };
    if event.event == EventKind::ConnectRequest {
        // `target` is the listener's box (the child inherited its context).
        // SAFETY: the listener's box lives until its destroy, which waits for this handler.
        let listener = unsafe { &(*target).public };
        if listener.cm_handler.is_none() {
            // No handler to hand the child to: nobody could ever answer or destroy it.
            // As a handler's non-zero return (rule 7): rejected, and no box made.
            return Err(Errno::EINVAL);
        }
        target = new_box(
            id.clone(),
            listener.cm_handler,
            listener.context,
            listener.device,
        );
    } else {
        // A CONNECT_REPLY tells the id its real addresses (the local port, for one).
        // SAFETY: the box lives until destroy, which waits for this handler.
        let public = unsafe { &mut (*target).public };
        public.local_addr = to_sockaddr(&event.local_addr);
        public.remote_addr = to_sockaddr(&event.remote_addr);
    }
    let shown = &event.private_data[..event.private_data.len().min(usize::from(u8::MAX))];
    let mut c_event = IwCmEvent {
        event: event.event as c_int,
        status: event.status,
        local_addr: to_sockaddr(&event.local_addr),
        remote_addr: to_sockaddr(&event.remote_addr),
        private_data: if shown.is_empty() {
            ptr::null()
        } else {
            shown.as_ptr().cast()
        },
        provider_data: ptr::null_mut(),
        private_data_len: shown.len() as u8,
        ord: event.ord.min(u32::from(u8::MAX)) as u8,
        ird: event.ird.min(u32::from(u8::MAX)) as u8,
        iwnic_rtr: c_rtr(event.rtr),
    };
    // SAFETY: as above; the handler pointer was given by the application.
    let handler = unsafe { (*target).public.cm_handler };
    let Some(handler) = handler else {
        return Ok(());
    };
    // SAFETY: the application's handler with a live id and an event valid for the call.
    let ret = unsafe { handler(target.cast(), &mut c_event) };
    if ret == 0 {
        return Ok(());
    }
    // Rule 7: the driver destroys the id; its C box goes now (the application must not
    // touch it again).
    // SAFETY: the box was made by `new_box` and nothing else frees it after a non-zero return.
    drop(unsafe { Box::from_raw(target) });
    Err(Errno::from_status(ret).unwrap_or(Errno::EINVAL))
}

/// # Safety
/// `cm_id` must be an id returned by `iw_create_cm_id` (or delivered to a handler) and not
/// destroyed.
unsafe fn id_ref<'a>(cm_id: *mut IwCmId) -> Option<&'a mut IdBox> {
    // SAFETY: per the function's contract.
    unsafe { cm_id.cast::<IdBox>().as_mut() }
}

/// `iw_create_cm_id`: a new id, or the kernel's `ERR_PTR(-errno)`.
///
/// # Safety
/// `device` must come from `iwnic_open_inprocess` and not be closed.
#[no_mangle]
pub unsafe extern "C" fn iw_create_cm_id(
    device: *mut IbDevice,
    cm_handler: IwCmHandler,
    context: *mut c_void,
) -> *mut IwCmId {
    // SAFETY: per the function's contract.
    let Some(dev) = (unsafe { device.as_ref() }) else {
        return err_ptr(Errno::EINVAL);
    };
    let placeholder: crate::Context = Arc::new(());
    match dev.device.create_cm_id(shim, placeholder) {
        Ok(id) => new_box(id, cm_handler, context, device).cast(),
        Err(errno) => err_ptr(errno),
    }
}

/// `iw_destroy_cm_id`.
///
/// # Safety
/// `cm_id` must be a live id; it is freed.
#[no_mangle]
pub unsafe extern "C" fn iw_destroy_cm_id(cm_id: *mut IwCmId) {
    // SAFETY: per the function's contract.
    if unsafe { id_ref(cm_id) }.is_none() {
        return;
    }
    // SAFETY: a live box made by `new_box`.
    let boxed = unsafe { Box::from_raw(cm_id.cast::<IdBox>()) };
    boxed.id.clone().destroy();
}

/// `iw_cm_listen`: listens on `cm_id->local_addr`.
///
/// # Safety
/// `cm_id` must be a live id.
#[no_mangle]
pub unsafe extern "C" fn iw_cm_listen(cm_id: *mut IwCmId, backlog: c_int) -> c_int {
    // SAFETY: per the function's contract.
    let Some(b) = (unsafe { id_ref(cm_id) }) else {
        return Errno::EINVAL.get();
    };
    let result = (|| {
        let backlog = u32::try_from(backlog).map_err(|_| Errno::EINVAL)?;
        if b.id.state() == Some(crate::IdState::Idle) {
            if let Some(addr) = from_sockaddr(&b.public.local_addr)? {
                b.id.set_local_addr(addr)?;
            }
        }
        b.id.listen(backlog)
    })();
    status_of(result)
}

/// # Safety
/// `param` must be null or point at a valid conn_param whose private data is readable.
unsafe fn conn_param(param: *const IwCmConnParam) -> Result<ConnParam, Errno> {
    // SAFETY: per the function's contract.
    let p = unsafe { param.as_ref() }.ok_or(Errno::EINVAL)?;
    let len = usize::from(p.private_data_len);
    if len > MAX_PRIVATE_DATA {
        return Err(Errno::EINVAL);
    }
    let private_data = if len == 0 || p.private_data.is_null() {
        Vec::new()
    } else {
        // SAFETY: per the function's contract.
        unsafe { std::slice::from_raw_parts(p.private_data.cast::<u8>(), len) }.to_vec()
    };
    Ok(ConnParam {
        private_data,
        ord: p.ord,
        ird: p.ird,
        qpn: p.qpn,
    })
}

/// `iw_cm_connect`: connects to `cm_id->remote_addr` from `cm_id->local_addr` (or any).
///
/// # Safety
/// `cm_id` must be a live id, `iw_param` a valid conn_param.
#[no_mangle]
pub unsafe extern "C" fn iw_cm_connect(
    cm_id: *mut IwCmId,
    iw_param: *const IwCmConnParam,
) -> c_int {
    // SAFETY: per the function's contract.
    let Some(b) = (unsafe { id_ref(cm_id) }) else {
        return Errno::EINVAL.get();
    };
    let result = (|| {
        // SAFETY: per the function's contract.
        let param = unsafe { conn_param(iw_param) }?;
        if b.id.state() == Some(crate::IdState::Idle) {
            if let Some(addr) = from_sockaddr(&b.public.local_addr)? {
                b.id.set_local_addr(addr)?;
            }
            if let Some(addr) = from_sockaddr(&b.public.remote_addr)? {
                b.id.set_remote_addr(addr)?;
            }
        }
        b.id.connect(&param)
    })();
    status_of(result)
}

/// `iw_cm_accept`.
///
/// # Safety
/// `cm_id` must be a live id, `iw_param` a valid conn_param.
#[no_mangle]
pub unsafe extern "C" fn iw_cm_accept(cm_id: *mut IwCmId, iw_param: *const IwCmConnParam) -> c_int {
    // SAFETY: per the function's contract.
    let Some(b) = (unsafe { id_ref(cm_id) }) else {
        return Errno::EINVAL.get();
    };
    // SAFETY: per the function's contract.
    let result = match unsafe { conn_param(iw_param) } {
        Ok(param) => b.id.accept(&param),
        Err(errno) => b.id.accept_unreadable(errno),
    };
    status_of(result)
}

/// `iw_cm_reject`.
///
/// # Safety
/// `cm_id` must be a live id; `private_data` readable for `private_data_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn iw_cm_reject(
    cm_id: *mut IwCmId,
    private_data: *const c_void,
    private_data_len: u8,
) -> c_int {
    // SAFETY: per the function's contract.
    let Some(b) = (unsafe { id_ref(cm_id) }) else {
        return Errno::EINVAL.get();
    };
    let data = if private_data.is_null() || private_data_len == 0 {
        &[][..]
    } else {
        // SAFETY: per the function's contract.
        unsafe {
            std::slice::from_raw_parts(private_data.cast::<u8>(), usize::from(private_data_len))
        }
    };
    status_of(b.id.reject(data))
}

/// `iw_cm_disconnect`.
///
/// # Safety
/// `cm_id` must be a live id.
#[no_mangle]
pub unsafe extern "C" fn iw_cm_disconnect(cm_id: *mut IwCmId, abrupt: c_int) -> c_int {
    // SAFETY: per the function's contract.
    let Some(b) = (unsafe { id_ref(cm_id) }) else {
        return Errno::EINVAL.get();
    };
    status_of(b.id.disconnect(abrupt != 0))
}

/// `iw_cm_init_qp_attr`: reads `qp_attr->qp_state`, writes the access flags and the mask.
///
/// # Safety
/// `cm_id` must be a live id; `qp_attr` and `qp_attr_mask` valid pointers.
#[no_mangle]
pub unsafe extern "C" fn iw_cm_init_qp_attr(
    cm_id: *mut IwCmId,
    qp_attr: *mut IbQpAttr,
    qp_attr_mask: *mut c_int,
) -> c_int {
    // SAFETY: per the function's contract.
    let (Some(b), Some(attr), Some(mask)) = (
        unsafe { id_ref(cm_id) },
        unsafe { qp_attr.as_mut() },
        unsafe { qp_attr_mask.as_mut() },
    ) else {
        return Errno::EINVAL.get();
    };
    let state = QpState::from_raw(attr.qp_state).ok_or(Errno::EINVAL);
    match state.and_then(|s| b.id.init_qp_attr(s)) {
        Ok(update) => {
            *mask = update.mask as c_int;
            if update.mask & crate::cm::IB_QP_ACCESS_FLAGS != 0 {
                attr.qp_access_flags = update.qp_access_flags as c_int;
            }
            0
        }
        Err(errno) => errno.get(),
    }
}

/// `iwcm_reject_msg`.
#[no_mangle]
pub extern "C" fn iwcm_reject_msg(reason: c_int) -> *const c_char {
    crate::cm::reject_msg_c(reason).as_ptr()
}

/// Open a device over a new in-process link whose host record queue holds
/// `host_queue_capacity` records (0: the default); its NIC end goes to `*nic`, for a
/// simulator. Returns 0 or a negative errno.
///
/// # Safety
/// `device` and `nic` must be valid pointers to write to.
#[no_mangle]
pub unsafe extern "C" fn iwnic_open_inprocess(
    host_queue_capacity: c_uint,
    device: *mut *mut IbDevice,
    nic: *mut *mut IwnicNic,
) -> c_int {
    if device.is_null() || nic.is_null() {
        return Errno::EINVAL.get();
    }
    let capacity = match host_queue_capacity {
        0 => DEFAULT_HOST_QUEUE_CAPACITY,
        n => n as usize,
    };
    let (transport, nic_end) = in_process(capacity);
    // SAFETY: per the function's contract.
    unsafe {
        *device = Box::into_raw(Box::new(IbDevice {
            device: Device::open(transport),
        }));
        *nic = Box::into_raw(Box::new(IwnicNic { nic: nic_end }));
    }
    0
}

/// Close a device: its threads stop and its link closes. Ids not destroyed are leaked.
///
/// # Safety
/// `device` must come from `iwnic_open_inprocess`; it is freed. Not from a handler.
#[no_mangle]
pub unsafe extern "C" fn iwnic_close(device: *mut IbDevice) {
    if !device.is_null() {
        // SAFETY: per the function's contract.
        drop(unsafe { Box::from_raw(device) });
    }
}

/// Make a QP number known to accept and connect.
///
/// # Safety
/// `device` must be an open device.
#[no_mangle]
pub unsafe extern "C" fn iwnic_register_qp(device: *mut IbDevice, qpn: u32) {
    // SAFETY: per the function's contract.
    if let Some(dev) = unsafe { device.as_ref() } {
        dev.device.register_qp(qpn);
    }
}

/// Wait up to `timeout_ms` for the next command record and copy it into `buf`: its
/// length, 0 on timeout, -ENODEV once the link is closed, -EMSGSIZE if `buf` is too small
/// (the record is lost).
///
/// # Safety
/// `nic` must be live; `buf` writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn iwnic_nic_wait_command(
    nic: *mut IwnicNic,
    buf: *mut c_void,
    len: usize,
    timeout_ms: c_uint,
) -> c_long {
    // SAFETY: per the function's contract.
    let Some(n) = (unsafe { nic.as_ref() }) else {
        return -c_long::from(ENODEV);
    };
    match n
        .nic
        .wait_command(Duration::from_millis(u64::from(timeout_ms)))
    {
        Ok(record) if record.len() <= len => {
            // SAFETY: per the function's contract.
            unsafe { ptr::copy_nonoverlapping(record.as_ptr(), buf.cast::<u8>(), record.len()) };
            record.len() as c_long
        }
        Ok(_) => -c_long::from(EMSGSIZE),
        Err(TransportError::Timeout) => 0,
        Err(TransportError::Closed) => -c_long::from(ENODEV),
    }
}

/// Records the host queue can take now.
///
/// # Safety
/// `nic` must be live.
#[no_mangle]
pub unsafe extern "C" fn iwnic_nic_host_space(nic: *const IwnicNic) -> usize {
    // SAFETY: per the function's contract.
    unsafe { nic.as_ref() }.map_or(0, |n| n.nic.host_space())
}

/// Queue a completion or event record for the host.
///
/// # Safety
/// `nic` must be live; `record` readable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn iwnic_nic_push_record(
    nic: *const IwnicNic,
    record: *const c_void,
    len: usize,
) {
    // SAFETY: per the function's contract.
    if let (Some(n), false) = (unsafe { nic.as_ref() }, record.is_null()) {
        // SAFETY: per the function's contract.
        n.nic
            .push_record(unsafe { std::slice::from_raw_parts(record.cast::<u8>(), len) });
    }
}

/// Free the NIC end (the link stays open for the device until either end closes it).
///
/// # Safety
/// `nic` must come from `iwnic_open_inprocess`; it is freed.
#[no_mangle]
pub unsafe extern "C" fn iwnic_nic_free(nic: *mut IwnicNic) {
    if !nic.is_null() {
        // SAFETY: per the function's contract.
        drop(unsafe { Box::from_raw(nic) });
    }
}

// The header declares sockaddr_storage fields; keep Rust and C agreeing on it.
const _: () = assert!(size_of::<sockaddr_storage>() == 128);
