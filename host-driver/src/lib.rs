//! iwnic host driver: the Linux `iw_cm` API over an iwnic NIC, with the kernel's
//! semantics (`../shared/spec/iwcm.md` is the contract): ids and their states, errno
//! returns, one ordered event-dispatch context, and a C ABI with the kernel's names.
//!
//! It talks to the NIC only through the host-interface records of
//! [`iwnic_proto::host`]: commands down with their completions, events up.
//!
//! Status: the records exist and are tested in `iwnic-proto`; the API, dispatch,
//! transports and C ABI are the next milestone (host-driver issue).
#![forbid(unsafe_code)]
