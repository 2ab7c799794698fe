//! iwnic firmware: the connection state machine of the NIC, `no_std` and allocation-free.
//!
//! It runs everything between a SYN and FPDU mode, and everything after a FIN or RST:
//! the TCP control path (handshake, control-segment retransmission, close, TIME_WAIT),
//! MPA negotiation (revision 1 and 2, peer-to-peer RTR, IRD/ORD, private data), listeners
//! with backlog and half-open limits, host commands and events with the `iw_cm`
//! contract's ordering, timers and counters. The datapath carries connections in FPDU
//! mode; the firmware hands each one over at an exact sequence number and takes it back
//! at close.
//!
//! Everything reaches the NIC through [`Hal`]; time is passed to [`Firmware::poll`],
//! never read, so every run is repeatable.
#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

pub mod bringup;
mod commands;
pub mod config;
pub mod counters;
pub mod hal;
mod log;
mod machine;
mod negotiation;
mod segments;
pub mod selftest;
mod table;
mod timer;

pub use config::Config;
pub use counters::Counters;
pub use hal::{
    FlowContext, FlowEvent, FlowEventKind, FlowTableFull, FlowWrite, FourTuple, Hal, Nic, TxSlot,
    MAX_FRAME_LEN, MAX_TX_PAYLOAD,
};
pub use machine::{Firmware, State, CONNECTION_ENTRY_BYTES, MAX_LISTENERS};
