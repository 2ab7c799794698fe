//! iwnic testbench: the combined system in simulation.
//!
//! - [`engine`]: the datapath interface every simulation engine implements.
//! - [`hdl_engine`]: `nic_top` as an engine, on Verilator and on RustHDL's simulator.
//! - [`model`]: the behavioural model of the datapath, the reference for the HDL.
//! - [`nic`]: an engine with the real firmware in the loop and the host link.
//! - [`link`]: the wire between two NICs, with seeded faults and a pcap of both ways.
//! - [`sim`]: two NICs and the link on their own thread, for host drivers to use.
//! - [`pcap`], [`tshark`]: captures and Wireshark's verdict on them.
//! - [`conversation`]: a scripted MPA v2 conversation for reference captures.

pub mod conversation;
pub mod engine;
pub mod hdl_engine;
pub mod link;
pub mod model;
pub mod nic;
pub mod pcap;
pub mod scenario;
pub mod sim;
pub mod tshark;
