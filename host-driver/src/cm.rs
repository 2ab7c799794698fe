//! The iw_cm vocabulary: id states, events, connection parameters, QP attributes.

use std::any::Any;
use std::ffi::CStr;
use std::net::SocketAddr;
use std::sync::Arc;

pub use iwnic_proto::host::EventKind;
pub use iwnic_proto::mpa::{RtrTypes, MAX_PRIVATE_DATA};

use crate::errno::{ECONNREFUSED, ECONNRESET, ETIMEDOUT};

/// The states of an id (`spec/iwcm.md`, "States of an id").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdState {
    Idle,
    Listen,
    /// Incoming connection handed to the application, waiting for accept or reject;
    /// after a successful accept it stays here until ESTABLISHED arrives.
    ConnRecv,
    /// Outgoing connection waiting for the peer's reply.
    ConnSent,
    Established,
    Closing,
    /// `destroy` is tearing the id down.
    Destroying,
}

impl IdState {
    /// Every state, for tables and tests.
    pub const ALL: [IdState; 7] = [
        IdState::Idle,
        IdState::Listen,
        IdState::ConnRecv,
        IdState::ConnSent,
        IdState::Established,
        IdState::Closing,
        IdState::Destroying,
    ];
}

/// An event as the application's handler sees it (the kernel's `struct iw_cm_event`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmEvent {
    pub event: EventKind,
    /// 0 or a negative errno.
    pub status: i32,
    pub local_addr: SocketAddr,
    pub remote_addr: SocketAddr,
    /// All of it: up to 512 bytes (rule 11).
    pub private_data: Vec<u8>,
    /// CONNECT_REQUEST: the initiator's IRD and ORD. CONNECT_REPLY and ESTABLISHED: the
    /// local ORD in `ird` and the local IRD in `ord` (rule 9, the convention rdma_cm reads).
    pub ird: u32,
    pub ord: u32,
    /// CONNECT_REPLY 0 and ESTABLISHED in MPA peer-to-peer mode: the RTR that began FPDU
    /// mode, one type; none otherwise. Not in the kernel's event, whose providers send
    /// the RTR themselves; here the NIC sends it, and the application's RDMAP must count
    /// it: an RTR Send or RDMA Read Request is message number 1 of its queue (the
    /// initiator's Sends or Read Requests), so that side's own start at 2, and the
    /// responder's inbound ones likewise.
    pub rtr: RtrTypes,
}

/// What accept and connect offer (the kernel's `struct iw_cm_conn_param`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnParam {
    /// Up to 512 bytes, less what MPA v2 takes for its own block (the NIC checks).
    pub private_data: Vec<u8>,
    pub ord: u32,
    pub ird: u32,
    /// A QP registered with [`crate::Device::register_qp`].
    pub qpn: u32,
}

/// The QP states `init_qp_attr` is asked about (`enum ib_qp_state`, kernel values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpState {
    Reset = 0,
    Init = 1,
    Rtr = 2,
    Rts = 3,
    Sqd = 4,
    Sqe = 5,
    Err = 6,
}

impl QpState {
    pub fn from_raw(raw: i32) -> Option<QpState> {
        use QpState::*;
        [Reset, Init, Rtr, Rts, Sqd, Sqe, Err]
            .get(usize::try_from(raw).ok()?)
            .copied()
    }
}

/// `IB_QP_STATE`: the attribute mask bit for the QP state.
pub const IB_QP_STATE: u32 = 1;
/// `IB_QP_ACCESS_FLAGS`: the attribute mask bit for the access flags.
pub const IB_QP_ACCESS_FLAGS: u32 = 1 << 3;
/// `IB_ACCESS_REMOTE_WRITE`.
pub const IB_ACCESS_REMOTE_WRITE: u32 = 1 << 1;
/// `IB_ACCESS_REMOTE_READ`.
pub const IB_ACCESS_REMOTE_READ: u32 = 1 << 2;

/// The QP attributes iw_cm wants set for a transition: which ones (`mask`) and the
/// access flags (meaningful when `mask` has [`IB_QP_ACCESS_FLAGS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAttrUpdate {
    pub mask: u32,
    pub qp_access_flags: u32,
}

/// The application's per-id context, shared with the child ids a listener spawns.
pub type Context = Arc<dyn Any + Send + Sync>;

/// The application's event handler (`iw_cm_handler`). It runs on the driver's dispatch
/// thread, one handler at a time. `Err` asks the driver to destroy the id (rule 7).
pub type Handler =
    Arc<dyn Fn(&crate::CmId, &CmEvent) -> Result<(), crate::Errno> + Send + Sync + 'static>;

/// `iwcm_reject_msg`: the reason a CONNECT_REPLY status gives, in the kernel's words.
pub fn reject_msg(status: i32) -> &'static str {
    reject_msg_c(status)
        .to_str()
        .expect("the messages are ASCII")
}

/// [`reject_msg`] as a C string, for the C ABI.
pub(crate) fn reject_msg_c(status: i32) -> &'static CStr {
    // Wrapping: any status may come, `i32::MIN` too (called from C, where a panic aborts).
    match status.wrapping_neg() {
        ECONNRESET => c"reset by remote host",
        ECONNREFUSED => c"refused by remote application",
        ETIMEDOUT => c"setup timeout",
        _ => c"unrecognized reason",
    }
}
