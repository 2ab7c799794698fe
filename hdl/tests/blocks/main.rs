//! Block tests of iwnic-hdl. Every block's vectors run on two simulators in lock step
//! (`dut`), under seeded random valid/ready stalls (`stream`), against the software
//! reference in `iwnic-proto`.

mod dut;
mod stream;
mod synth;

mod block_ram;
mod crc32c;
mod event_counter;
mod flow_table;
mod lint;
mod mpa_rx;
mod mpa_tx;
mod nic_top;
mod packet_fifo;
mod rtr_match;
mod skid_buffer;
mod tcp_rx;
mod tcp_tx;
mod tx_checksum;
