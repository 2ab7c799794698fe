//! iwnic firmware: the connection state machine of the NIC, `no_std`.
#![no_std]

pub mod selftest;
