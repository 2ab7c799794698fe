//! iwnic datapath in RustHDL (`rust-hdl` 0.46): Ethernet/IPv4/TCP parsing and checksums,
//! flow lookup and steering, MPA FPDU framing with CRC32c, ACK generation, and the NIC
//! top joining them. Streams are 64-bit data + 8-bit keep + last + valid/ready, byte 0 in
//! bits 7:0, one frame per packet.

pub mod crc32c;
pub mod mpa_tx;
pub mod synth;
pub mod verilator;
