//! iwnic testbench: the combined system in simulation.
//!
//! Today it holds the outside judges every later simulation is checked by: a pcap
//! writer whose timestamps come from simulated cycles ([`pcap`]), Wireshark's
//! dissector run over those captures ([`tshark`]), and a scripted iWARP conversation
//! built from `iwnic-proto` ([`conversation`]). The engines (behavioural model,
//! Verilator, RustHDL), the link model and the `iwnic sim` scenario build on these.

pub mod conversation;
pub mod pcap;
pub mod tshark;
