//! iwnic datapath in RustHDL (`rust-hdl` 0.46): Ethernet/IPv4/TCP parsing and checksums,
//! flow lookup and steering, MPA FPDU framing with CRC32c, ACK generation, and the NIC
//! top joining them. Streams are 64-bit data + 8-bit keep + last + valid/ready.
//!
//! Status: the crate pins `rust-hdl = "=0.46.0"`; the blocks, their Verilator runs and
//! the ECP5 synthesis flow are the next milestone (HDL issue).
