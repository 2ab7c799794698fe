//! iwnic host driver: the Linux `iw_cm` API over an iwnic NIC, with the kernel's
//! semantics (`shared/spec/iwcm.md` is the contract): ids and their states, errno
//! returns, one ordered event-dispatch context, and a C ABI with the kernel's names.
//!
//! It talks to the NIC only through the host-interface records of
//! [`iwnic_proto::host`] (commands down with their completions, events up), carried by a
//! [`Transport`]. One transport exists now: [`in_process`], whose NIC end a simulator
//! drives.
//!
//! ```
//! use std::sync::Arc;
//! use iwnic_host_driver::{in_process, ConnParam, Device, EventKind, DEFAULT_HOST_QUEUE_CAPACITY};
//!
//! let (transport, _nic) = in_process(DEFAULT_HOST_QUEUE_CAPACITY);
//! let device = Device::open(transport);
//! device.register_qp(1);
//! let listener = device
//!     .create_cm_id(
//!         |id, event| {
//!             if event.event == EventKind::ConnectRequest {
//!                 // Accepting from the handler is the common case, and safe.
//!                 id.accept(&ConnParam { qpn: 1, ird: 1, ord: 1, ..ConnParam::default() })?;
//!             }
//!             Ok(())
//!         },
//!         Arc::new(()),
//!     )
//!     .unwrap();
//! listener.set_local_addr("10.0.0.1:4791".parse().unwrap()).unwrap();
//! // listener.listen(16) now waits for the NIC (the simulator on `_nic`) to answer.
//! ```
//!
//! | module | what |
//! |---|---|
//! | [`Device`], [`CmId`] | the API: every iw_cm call, ids, dispatch |
//! | [`cm`] | events, parameters, states, QP attributes, `reject_msg` |
//! | [`transport`], [`in_process`] | the link to the NIC |
//! | [`rules`] | a checker of the contract's event rules over recorded traces |
//! | [`ffi`] | the C ABI (`include/iw_cm.h`) |
//! | [`errno`] | kernel errno values |
#![deny(unsafe_code)]

pub mod cm;
mod device;
pub mod errno;
pub mod ffi;
pub mod in_process;
pub mod rules;
pub mod transport;

pub use cm::{
    reject_msg, CmEvent, ConnParam, Context, EventKind, Handler, IdState, QpAttrUpdate, QpState,
    RtrTypes,
};
pub use device::{CmId, Device, DeviceConfig, DriverStats, IdKey};
pub use errno::{Errno, Result};
pub use in_process::{in_process, InProcessNic, InProcessTransport, DEFAULT_HOST_QUEUE_CAPACITY};
pub use transport::{Transport, TransportError};
