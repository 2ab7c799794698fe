//! iwnic datapath in RustHDL (`rust-hdl` 0.46): Ethernet/IPv4/TCP parsing and checksums,
//! flow lookup and steering, MPA FPDU framing with CRC32c, ACK generation, and the NIC
//! top joining them. Streams are 64-bit data + 8-bit keep + last + valid/ready, byte 0 in
//! bits 7:0, one frame per packet, sideband with the first beat.
//!
//! Blocks:
//! - [`crc32c`]: CRC32c over 64-bit beats with a partial last beat, as XOR matrices that
//!   `build.rs` generates;
//! - [`tcp_rx`]: the receive parser (Ethernet/IPv4/TCP frames → realigned TCP payload
//!   with header sideband, checksums verified, bad frames dropped and counted);
//! - [`flow_table`]: flow lookup, 4-tuple → connection index in block RAM (64 buckets
//!   × 4 ways, XOR-fold hash, a five-stage lookup), written by the firmware;
//! - [`mpa_rx`]: MPA receive delineation (TCP payload → ULPDUs, CRC32c checked, flow
//!   errors latched);
//! - [`packet_fifo`]: a packet queue committing on a good bit (host and firmware RX);
//! - [`mpa_tx`]: the MPA transmit framer (ULPDU stream → FPDU stream, 8 bytes/cycle);
//! - [`tcp_tx`]: the segment builder (descriptor + payload → Ethernet/IPv4/TCP frame);
//! - [`tx_checksum`]: transmit checksum insertion, store and forward;
//! - [`rtr_match`]: a payload against the RTR FPDUs iwnic sends (`nic_top` takes a
//!   flow's RTR on the datapath);
//! - [`nic_top`]: the whole datapath joined, with the flow contexts and the controller;
//! - parts: [`block_ram`] (block RAM read through its output register, without
//!   read-during-write logic, with or without a registered write port), [`skid_buffer`]
//!   (a stream slice with registered ready) and [`event_counter`] (a counter fed by a
//!   registered pulse).
//!
//! Tooling: [`verilator`] lints a block's exported Verilog and builds it into a model
//! driven from Rust; [`synth`] runs the ECP5 flow and reports LUTs, FFs, BRAMs and Fmax.
//! The block tests (`tests/blocks`) run every vector on RustHDL's simulator stepped by
//! hand and on Verilator in lock step, against `iwnic-proto`'s software reference.

pub mod block_ram;
pub mod crc32c;
pub mod event_counter;
pub mod export;
pub mod flow_table;
pub mod mpa_rx;
pub mod mpa_tx;
pub mod nic_top;
pub mod packet_fifo;
pub mod rtr_match;
pub mod skid_buffer;
pub mod synth;
pub mod tcp_rx;
pub mod tcp_tx;
pub mod tx_checksum;
pub mod verilator;
