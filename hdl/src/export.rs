//! Every block of the datapath as Verilog, by name: what `iwnic verilog` writes and
//! `iwnic synth` synthesises. The top of each module is named `top`.

use rust_hdl::prelude::*;

use crate::crc32c::Crc32c;
use crate::flow_table::EcpFlowTable;
use crate::mpa_rx::MpaRxDelineator;
use crate::mpa_tx::MpaTxFramer;
use crate::tcp_rx::TcpRxParser;

/// A block ready for export.
pub struct ExportedBlock {
    pub name: &'static str,
    /// What it does, in a line.
    pub about: &'static str,
    verilog: fn() -> String,
}

impl ExportedBlock {
    /// The block's Verilog (generated on each call: a block of the whole datapath takes
    /// a moment).
    pub fn verilog(&self) -> String {
        (self.verilog)()
    }
}

fn verilog_of<B: Block + Default>() -> String {
    let mut uut = B::default();
    uut.connect_all();
    generate_verilog(&uut)
}

/// The blocks, in datapath order (receive, then transmit).
pub fn blocks() -> [ExportedBlock; 5] {
    [
        ExportedBlock {
            name: "tcp_rx",
            about: "Ethernet II / IPv4 / TCP receive parser with both checksums",
            verilog: verilog_of::<TcpRxParser>,
        },
        ExportedBlock {
            name: "flow_table",
            about: "flow lookup: 4-tuple to connection index (256 entries, 64 buckets x 4 ways)",
            verilog: verilog_of::<EcpFlowTable>,
        },
        ExportedBlock {
            name: "mpa_rx",
            about: "MPA receive delineation: TCP payload to ULPDUs (CRC32c, length checks)",
            verilog: verilog_of::<MpaRxDelineator>,
        },
        ExportedBlock {
            name: "crc32c",
            about: "CRC32c over 64-bit beats with a partial last beat",
            verilog: verilog_of::<Crc32c>,
        },
        ExportedBlock {
            name: "mpa_tx",
            about: "MPA transmit framer: ULPDU stream to FPDUs (length, PAD, CRC32c)",
            verilog: verilog_of::<MpaTxFramer>,
        },
    ]
}
